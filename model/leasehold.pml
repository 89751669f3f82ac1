/*
 * leasehold.pml — a Promela model of the leasehold protocol, checked by spin (GitHub issue 19).
 * docs/model.md maps every step below to the code, lists the bounds, the properties and the
 * results; `pnpm model-check` (scripts/model-check.sh) runs everything.
 *
 * What is modeled:
 *   etcd          one linearizable store with revisions. Every transaction is one atomic step; a
 *                 successful one with writes takes the next revision; keys keep create_revision and
 *                 mod_revision as etcd does (a put on an existing key keeps its create_revision); a
 *                 lease, revoked or lapsed, deletes every key attached to it at one revision.
 *   coordinators  NC = 2. Each has its own session table (deadlines on its own clock), its own view
 *                 of etcd (an index read is a snapshot used later, so it can be stale) and its own
 *                 in-flight acquires (one handler per worker). Any step can be delayed (a pause);
 *                 a crash-restart (bounded) wipes its memory and ends its in-flight work.
 *   sink          per-resource fences; the write rule (accept only token == fence); the advance
 *                 rule (the fence only grows); results keyed by task (result id task:<t>).
 *   workers       NW, each the SDK's loop: open a session, acquire (the same request id again
 *                 until a definite answer), the last deadline check, then — after any pause — the
 *                 write, then complete; a worker can lose its connection and resume its session on
 *                 either coordinator (adoptSession).
 *   time          abstract and monotonic, judged by each coordinator for the sessions in its table:
 *                 a live session's deadline can be reached at any moment (the worker paused, its
 *                 heartbeats were late or lost) and, once reached, never moves again. A heartbeat
 *                 before it is accepted, one at or after it refused. This is a superset of every
 *                 timing of real clocks, heartbeats and pauses.
 *
 * Properties: assertions named after the chaos checker's violations (test/chaos/checker.ts);
 * with -DLIVENESS the LTL claims granted_0 .. granted_2, checked under weak fairness (-f).
 *
 * Known-bad variants, each of which must produce a counterexample:
 *   -DBAD_GRANT_BEFORE_ADVANCE  -DBAD_ACCEPT_GE  -DBAD_NO_OWNER_ABSENT  -DBAD_RENEW_AT_DEADLINE
 *   -DBAD_ADOPT_NO_MODREV       and two more:    -DBAD_ACCEPT_LE        -DBAD_OVERWRITE_RESULT
 *
 * Tie to the code: every transaction in packages/coordinator/src/etcd/transactions/*.ts has a
 * `txn <name>` comment here whose `compares:` paragraph is its header's, word for word; the unit
 * test test/model/txn-compares.test.ts fails when they differ. Change the model's guard and that
 * paragraph together.
 */

/* ================================================================= bounds */
#ifndef NW
#define NW 2            /* workers (2 or 3) */
#endif
#define NC 2            /* coordinators */
#define NR 2            /* resources */
#define NT 3            /* tasks; task t writes resource t % NR: tasks 0 and 2 share resource 0 */
#ifndef NINC
#define NINC 2          /* sessions (etcd leases) per worker over a run */
#endif
#define NS (NW * NINC)  /* session ids: worker w's k-th session is w * NINC + k */
#if NW * NINC < 2 || NW * NINC > 6 || NW > 3
#error "the model is written for 2 to 6 sessions and at most 3 workers"
#endif
#ifndef NQ
#define NQ 2          /* acquire request ids per session */
#endif
#ifndef CRASHES
#define CRASHES 1       /* coordinator crash-restarts */
#endif
#ifndef DISCONNECTS
#define DISCONNECTS 1   /* worker <-> coordinator connection losses */
#endif
#ifndef ETCD_FAULTS
#define ETCD_FAULTS 1   /* grant txns that fail to reach etcd, or apply with the reply lost */
#endif
#ifndef SINK_FAULTS
#define SINK_FAULTS 1   /* fence advances that fail to reach the sink, or apply with the reply lost */
#endif
#ifndef LAPSES
#define LAPSES 1        /* etcd leases lapsing (keepalives lost) */
#endif
#ifndef FAULTS
#define FAULTS 2        /* faults of any of the kinds above, in total */
#endif
#ifdef LIVENESS
#ifndef TICKS
#define TICKS 2         /* liveness runs: at most TICKS deadlines are reached, then every session holds */
#endif
#endif

#define NONE 255
#define ROGUE_TOKEN 250 /* a "bigger number" a worker makes up: never a revision of this model */
#define RES(t) ((t) % NR)
#define CI(c, s) ((c) * NS + (s))     /* coordinator c's table entry of session s */
#define HI(s, q) ((s) * NQ + (q))   /* holdings/<s>/<q> */
#define AK(c, w) ((c) * NW + (w))     /* coordinator c's acquire handler for worker w */
#define OWNER_OF(s) ((s) / NINC)      /* the worker of session s */

/* ================================================================= state */
/* etcd */
byte rev = 1;                 /* current revision; the tasks were submitted at revision 1 */
byte o_crev[NR];              /* owners/<r>: create_revision (0 = absent), the fencing token */
byte o_mrev[NR];              /*             mod_revision */
byte o_ses[NR] = NONE;        /*             lease (= session) it is attached to */
byte t_mrev[NT] = 1;          /* tasks/<t>:  mod_revision */
bit t_done[NT];               /*             state completed */
bit s_here[NS];               /* sessions/<s> exists */
byte s_mrev[NS];              /*             mod_revision */
byte s_coord[NS] = NONE;      /*             coordinatorId */
bit l_alive[NS];              /* the etcd lease of session s */
byte h_crev[NS * NQ];       /* holdings/<s>/<q>: create_revision (0 = absent) */
byte h_task[NS * NQ];       /*                   the task it records */

/* coordinators */
bit ct_has[NC * NS];          /* coordinator c has session s in its table (and serves it) */
bit ct_end[NC * NS];          /*   phase ending (takeDue ran: isLive is false) */
byte ct_mrev[NC * NS];        /*   LocalSession.modRevision: the session key's mod_revision it wrote */
byte ct_v[NC * NS];           /*   deadline: 2 before it (now < deadline), 1 reached (now >= deadline) */
byte e_s[NC] = NONE;          /* the session coordinator c is ending (#end), NONE if none */
byte e_V[NC];                 /*   knownUpTo: the index revision its owner list is from */
byte e_mask[NC];              /*   the owners of e_s[c] in that index (bit r) */
bit e_rv[NC];                 /*   ended (or found gone): the lease revoke is next */
byte a_q[NC * NW] = NONE;     /* acquire handler (c, w): request id in flight, NONE when idle */
byte a_s[NC * NW];            /*   its session */
byte a_pc[NC * NW];           /*   its next step (A_*) */
byte a_t[NC * NW];            /*   the task it works on */
byte a_m[NC * NW];            /*   that task's mod_revision, as the index had it */
byte a_sm[NC * NW];           /*   the session mod_revision it knows (LocalSession.modRevision) */
byte a_T[NC * NW];            /*   the token */
bit a_fresh[NC * NW];         /*   a new grant (not the replay of a recorded one) */
byte a_out[NC * NW];          /*   the reply it will send (R_*) */

/* sink */
byte fence[NR];               /* 0 = never advanced */
byte r_pay[NT];               /* result task:<t>: payload (the writing worker + 1; 0 = absent) */

/* workers */
byte w_ses[NW] = NONE;        /* current session */
byte w_inc[NW];               /* sessions opened so far */
byte w_conn[NW] = NONE;       /* coordinator it is connected to */
byte w_q[NW];                 /* request id of its next (or pending) acquire */
byte w_wait[NW] = NONE;       /* coordinator whose acquire answer it waits for */
byte w_ph[NW];                /* P_IDLE, P_CHECKED (granted; its deadline check passed, the write is next), P_WRITTEN */
byte w_t[NW] = NONE;          /* its grant: task, token, request id */
byte w_tok[NW];
byte w_m[NW];                 /* the session key's mod_revision its resume read */
byte w_rc[NW] = NONE;         /*   the coordinator of that resume (a crash of it cancels the resume) */

#define P_IDLE 0
#define P_CHECKED 2
#define P_WRITTEN 3

/* acquire handler steps */
#define A_TXN 1         /* the grant txn is next */
#define A_FENCE 2       /* the fence advance (and the delivery) is next */
#define A_REPLAY 3      /* a recorded grant: read the owner key, advance, deliver */
#define A_ABANDON 4     /* abandonGrant / forgetRequest, then the answer */
#define A_LATE_ADVANCE 5 /* (BAD_GRANT_BEFORE_ADVANCE) the advance after the grant */
/* acquire answers */
#define R_GRANT 1
#define R_NONE 2
#define R_RETRY 3       /* UNAVAILABLE (retryable): the worker sends the same request id again */
#define R_EXPIRED 4     /* SESSION_EXPIRED */
#define R_NOTHOLDER 5
/* fence advance outcomes */
#define ADV_OK 10
#define ADV_REFUSED 11
#define ADV_ERR 12
/* write outcomes */
#define W_WRITTEN 20
#define W_REPLAYED 21
#define W_CONFLICT 22   /* RESULT_CONFLICT */
#define W_STALE 23      /* STALE_TOKEN */
#define W_FENCE 24      /* FENCE_CONFLICT */

/* scratch variables of a step (every step is a d_step and leaves them 0): not part of the state */
#ifdef NOHIDDEN
byte x_c, x_s, x_t, x_r, x_q, x_i, x_any, x_out, x_ok;       /* (pan's BFS refuses hidden variables) */
#else
hidden byte x_c, x_s, x_t, x_r, x_q, x_i, x_any, x_out, x_ok;
#endif

/* fault budgets: each kind at most its own count, all kinds together at most FAULTS */
#define FAULT_OK(f) (f > 0 && f_any > 0)
#define FAULT_USED(f) f--; f_any--
byte f_crash = CRASHES;
byte f_disc = DISCONNECTS;
byte f_etcd = ETCD_FAULTS;
byte f_sink = SINK_FAULTS;
byte f_lapse = LAPSES;
byte f_any = FAULTS;
#ifdef LIVENESS
byte f_tick = TICKS;
#endif

/* ghosts: observers only, never read by the protocol */
byte lacc[NR];                /* token of the last accepted write per resource */
bit s_dead[NS];               /* a coordinator ended the session at its deadline (endSession) */
byte ack[NT];                 /* the payload a worker was told landed (written / replayed) */
#ifdef LIVENESS
bit gr[NT];                   /* a live grant of task t reached a worker since its resource was freed */
#endif

/* ================================================================= state reduction
 * CANON ends every step that can add or drop a revision value. It is a model-checking device, not
 * part of the protocol, and it changes no behaviour:
 * - fault budgets: a kind's remaining count is capped by the total remaining;
 * - revision renaming: revisions are only compared (==, <, <=) and a new one is greater than all,
 *   so renaming the ones in use to 1..k in order (0 = absent and the rogue token stay) is a
 *   bisimulation — states that differ only in which absolute numbers history handed out become one;
 * - symmetry (not with -DNOSYM or -DLIVENESS): workers are interchangeable (worker w writes payload
 *   w + 1, which is renamed with it) and so are coordinators; every process sits at the top of its
 *   loop between steps with its locals reset, so permuting the global data of workers (their
 *   sessions, handlers, payloads) and of coordinators only relabels identical processes. The
 *   smallest permuted vector stands for all.
 * `spin -t` replays do not run C code: trails show etcd-like absolute revisions and the original
 * labels (the same choices, guards and assertions).
 */
c_code {
  static void rename_revisions(State *x) {
    unsigned char used[256], map[256];
    int i, k;
    memset(used, 0, sizeof used);
    used[x->rev] = 1;
    for (i = 0; i < NR; i++) used[x->o_crev[i]] = used[x->o_mrev[i]] = used[x->fence[i]] = used[x->lacc[i]] = 1;
    for (i = 0; i < NT; i++) used[x->t_mrev[i]] = 1;
    for (i = 0; i < NS; i++) used[x->s_mrev[i]] = 1;
    for (i = 0; i < NS * NQ; i++) used[x->h_crev[i]] = 1;
    for (i = 0; i < NC * NS; i++) used[x->ct_mrev[i]] = 1;
    for (i = 0; i < NC; i++) used[x->e_V[i]] = 1;
    for (i = 0; i < NC * NW; i++) used[x->a_m[i]] = used[x->a_sm[i]] = used[x->a_T[i]] = 1;
    for (i = 0; i < NW; i++) used[x->w_tok[i]] = used[x->w_m[i]] = 1;
    k = 0;
    for (i = 1; i < 256; i++) map[i] = (used[i] && i != ROGUE_TOKEN) ? ++k : 0;
    map[0] = 0;
    map[ROGUE_TOKEN] = ROGUE_TOKEN;
#define CANON_M(v) (v) = map[(v)]
    CANON_M(x->rev);
    for (i = 0; i < NR; i++) { CANON_M(x->o_crev[i]); CANON_M(x->o_mrev[i]); CANON_M(x->fence[i]); CANON_M(x->lacc[i]); }
    for (i = 0; i < NT; i++) CANON_M(x->t_mrev[i]);
    for (i = 0; i < NS; i++) CANON_M(x->s_mrev[i]);
    for (i = 0; i < NS * NQ; i++) CANON_M(x->h_crev[i]);
    for (i = 0; i < NC * NS; i++) CANON_M(x->ct_mrev[i]);
    for (i = 0; i < NC; i++) CANON_M(x->e_V[i]);
    for (i = 0; i < NC * NW; i++) { CANON_M(x->a_m[i]); CANON_M(x->a_sm[i]); CANON_M(x->a_T[i]); }
    for (i = 0; i < NW; i++) { CANON_M(x->w_tok[i]); CANON_M(x->w_m[i]); }
  }
#if !defined(NOSYM) && !defined(LIVENESS)
  /* dst = src with worker w renamed pw[w] and coordinator c renamed pc[c] */
  static void permute(State *d, const State *x, const int *pw, const int *pc) {
    int ps[NS], i, j, q;
#define SV(v) ((v) == NONE ? NONE : ps[(v)])
#define CV(v) ((v) == NONE ? NONE : pc[(v)])
#define PV(v) ((v) >= 1 && (v) <= NW ? pw[(v) - 1] + 1 : (v))
    for (i = 0; i < NS; i++) ps[i] = pw[i / NINC] * NINC + i % NINC;
    for (i = 0; i < NW; i++) {
      j = pw[i];
      d->w_ses[j] = SV(x->w_ses[i]); d->w_inc[j] = x->w_inc[i]; d->w_conn[j] = CV(x->w_conn[i]);
      d->w_q[j] = x->w_q[i]; d->w_wait[j] = CV(x->w_wait[i]); d->w_ph[j] = x->w_ph[i]; d->w_t[j] = x->w_t[i];
      d->w_tok[j] = x->w_tok[i]; d->w_m[j] = x->w_m[i]; d->w_rc[j] = CV(x->w_rc[i]);
    }
    for (i = 0; i < NS; i++) {
      j = ps[i];
      d->s_here[j] = x->s_here[i]; d->s_mrev[j] = x->s_mrev[i]; d->s_coord[j] = CV(x->s_coord[i]);
      d->l_alive[j] = x->l_alive[i]; d->s_dead[j] = x->s_dead[i];
      for (q = 0; q < NQ; q++) { d->h_crev[j * NQ + q] = x->h_crev[i * NQ + q]; d->h_task[j * NQ + q] = x->h_task[i * NQ + q]; }
    }
    for (i = 0; i < NC; i++) {
      j = pc[i];
      d->e_s[j] = SV(x->e_s[i]); d->e_V[j] = x->e_V[i]; d->e_mask[j] = x->e_mask[i]; d->e_rv[j] = x->e_rv[i];
      for (q = 0; q < NS; q++) {
        d->ct_has[j * NS + ps[q]] = x->ct_has[i * NS + q]; d->ct_end[j * NS + ps[q]] = x->ct_end[i * NS + q];
        d->ct_mrev[j * NS + ps[q]] = x->ct_mrev[i * NS + q]; d->ct_v[j * NS + ps[q]] = x->ct_v[i * NS + q];
      }
      for (q = 0; q < NW; q++) {
        int a = i * NW + q, b = j * NW + pw[q];
        d->a_q[b] = x->a_q[a]; d->a_s[b] = x->a_s[a] == 0 && x->a_q[a] == NONE ? 0 : SV(x->a_s[a]);
        d->a_pc[b] = x->a_pc[a]; d->a_t[b] = x->a_t[a]; d->a_m[b] = x->a_m[a]; d->a_sm[b] = x->a_sm[a];
        d->a_T[b] = x->a_T[a]; d->a_fresh[b] = x->a_fresh[a]; d->a_out[b] = x->a_out[a];
      }
    }
    for (i = 0; i < NR; i++) d->o_ses[i] = SV(x->o_ses[i]);
    for (i = 0; i < NT; i++) { d->r_pay[i] = PV(x->r_pay[i]); d->ack[i] = PV(x->ack[i]); }
  }
#endif
  static void canon(void) {
    rename_revisions(&now);
    /* fault budgets: a kind's count above the total left means the total; none left, all zero */
    if (now.f_crash > now.f_any) now.f_crash = now.f_any;
    if (now.f_disc > now.f_any) now.f_disc = now.f_any;
    if (now.f_etcd > now.f_any) now.f_etcd = now.f_any;
    if (now.f_sink > now.f_any) now.f_sink = now.f_any;
    if (now.f_lapse > now.f_any) now.f_lapse = now.f_any;
#if !defined(NOSYM) && !defined(LIVENESS)
    {
      static State best, cand;
      static int wperm[6][3] = { {0, 1, 2}, {1, 0, 2}, {0, 2, 1}, {2, 1, 0}, {1, 2, 0}, {2, 0, 1} };
      int nw = NW == 3 ? 6 : NW == 2 ? 2 : 1, iw, ic, changed = 0;
      size_t n = (size_t) ((char *) &now.sv[0] - (char *) &now);
      memcpy(&best, &now, n);
      for (iw = 0; iw < nw; iw++)
        for (ic = 0; ic < 2; ic++) {
          int pc[2];
          if (iw == 0 && ic == 0) continue;
          pc[0] = ic; pc[1] = 1 - ic;
          memcpy(&cand, &now, n);
          permute(&cand, &now, wperm[iw], pc);
          if (memcmp(&cand, &best, n) < 0) { memcpy(&best, &cand, n); changed = 1; }
        }
      if (changed) memcpy(&now, &best, n);
    }
#endif
  }
}
#ifdef NOCANON
#define CANON skip
#else
#define CANON c_code { canon(); }
#endif

/* ================================================================= rules */
#ifdef BAD_ACCEPT_GE
#define WRITE_OK(T, F) ((T) >= (F))
#elif defined(BAD_ACCEPT_LE)
#define WRITE_OK(T, F) ((T) <= (F))
#else
#define WRITE_OK(T, F) ((T) == (F))     /* the write rule: accept only token == fence */
#endif

#ifdef BAD_RENEW_AT_DEADLINE
#define BEFORE_DEADLINE(i) (ct_v[i] >= 1) /* the deadline reached does not stop it */
#else
#define BEFORE_DEADLINE(i) (ct_v[i] >= 2) /* now < deadline: exactly at the deadline it is refused */
#endif

/* SessionTable.isLive: an entry in phase live, now < deadline */
#define LIVE(c, s) (ct_has[CI(c, s)] && !ct_end[CI(c, s)] && ct_v[CI(c, s)] >= 2)
/* the index offers task t: pending, no owner key on its resource */
#define CAND(t) (!t_done[t] && o_crev[RES(t)] == 0)
#define ANY_CAND (CAND(0) || CAND(1) || CAND(2))

/* P(x) holds for some session x / some table entry x (cpp has no loops) */
#define ANY_S(P) (P(0) || P(1) || (NS > 2 && P(2)) || (NS > 3 && P(3)) || (NS > 4 && P(4)) || (NS > 5 && P(5)))
#define ANY_I(P) (P(0) || P(1) || P(2) || P(3) || (NC * NS > 4 && (P(4) || P(5) || P(6) || P(7))) || \
                  (NC * NS > 8 && (P(8) || P(9) || P(10) || P(11))))
/* (inside Coordinator(c)) its entry of session x: deadline reached while live / ending /
   rewritten by a peer (adopted) / its etcd lease gone */
#define DUE(x) (ct_has[CI(c, x)] && !ct_end[CI(c, x)] && ct_v[CI(c, x)] <= 1)
#define ENDING(x) (ct_has[CI(c, x)] && ct_end[CI(c, x)] && e_s[c] != (x))
#define MOVED(x) (ct_has[CI(c, x)] && e_s[c] != (x) && s_here[x] && s_coord[x] != c && s_mrev[x] > ct_mrev[CI(c, x)])
#define LOST(x) (ct_has[CI(c, x)] && !ct_end[CI(c, x)] && !l_alive[x])
#define LEASE(x) (l_alive[x])
/* (inside Coordinator(c)) a crash loses something: a session in its table, an acquire in flight, a resume */
#define HAS_ENTRY(x) (ct_has[CI(c, x)])
#define CRASH_MATTERS \
  (ANY_S(HAS_ENTRY) || e_s[c] != NONE || a_q[AK(c, 0)] != NONE || w_rc[0] == c || (NW > 1 && (a_q[AK(c, 1)] != NONE || w_rc[1] == c)) || \
   (NW > 2 && (a_q[AK(c, 2)] != NONE || w_rc[2] == c)))
#define TICKABLE(i) (ct_has[i] && !ct_end[i] && ct_v[i] == 2)
/* (inside Acquirer(c, w)) a handler step may run: its coordinator has not crashed since */
#define AK_ (AK(c, w))
#define STEP(pc) (a_q[AK_] != NONE && a_pc[AK_] == (pc))

/* ================================================================= helpers */

/* Delete owners/<r>: its owner interval ends. */
inline del_owner(r) {
  o_crev[r] = 0; o_mrev[r] = 0; o_ses[r] = NONE;
#ifdef LIVENESS
  gr[r] = 0; if :: r + NR < NT -> gr[r + NR] = 0 :: else -> skip fi;
#endif
}

/* The etcd lease of session s ends (revoke or lapse): every key attached to it goes, at one revision. */
inline lease_end(s, r, q, any) {
  any = s_here[s];
  for (r : 0 .. NR - 1) { if :: o_ses[r] == s -> del_owner(r); any = 1 :: else -> skip fi };
  for (q : 0 .. NQ - 1) {
    if :: h_crev[HI(s, q)] != 0 -> h_crev[HI(s, q)] = 0; h_task[HI(s, q)] = 0; any = 1 :: else -> skip fi
  };
  s_here[s] = 0; s_mrev[s] = 0; s_coord[s] = NONE; l_alive[s] = 0;
  if :: any -> rev++ :: else -> skip fi;
  r = 0; q = 0; any = 0
}

/* Remove coordinator c's table entry of session s. */
inline forget(c, s) {
  ct_has[CI(c, s)] = 0; ct_end[CI(c, s)] = 0; ct_mrev[CI(c, s)] = 0; ct_v[CI(c, s)] = 0
}

/* The worker gives up its grant (the lease is lost, or it is done). */
inline drop_grant(w) {
  w_ph[w] = P_IDLE; w_t[w] = NONE; w_tok[w] = 0
}

/* The worker is told its session is over (session.expired, SESSION_EXPIRED): it drops the session;
   a write not yet sent still goes out (P_CHECKED: the SDK's deadline check is behind it). */
inline drop_session(w) {
  w_ses[w] = NONE; w_conn[w] = NONE; w_wait[w] = NONE; w_q[w] = 0;
  w_m[w] = 0; w_rc[w] = NONE;
  if :: w_ph[w] == P_WRITTEN -> drop_grant(w) :: else -> skip fi
}

/* Coordinator c pushes lease.revoked + session.expired to the worker of session s, if connected. */
inline tell_expired(c, s) {
  if
  :: w_conn[OWNER_OF(s)] == c && w_ses[OWNER_OF(s)] == s -> drop_session(OWNER_OF(s))
  :: else -> skip
  fi
}

/* Coordinator c closes its socket to the worker of session s (the session moved, or c crashed). */
inline close_channel(c, s) {
  if
  :: w_conn[OWNER_OF(s)] == c && w_ses[OWNER_OF(s)] == s ->
       w_conn[OWNER_OF(s)] = NONE;
       if :: w_wait[OWNER_OF(s)] == c -> w_wait[OWNER_OF(s)] = NONE :: else -> skip fi
  :: else -> skip
  fi
}

/* Sink: POST /v1/fences/advance. The fence only grows; the same token again is `unchanged`. */
inline sink_advance(r, T, out) {
  if
  :: T > fence[r] -> printf("@@ note sink : fence of resource %d advanced %d -> %d\n", r, fence[r], T); fence[r] = T; out = ADV_OK
  :: T == fence[r] -> printf("@@ note sink : fence of resource %d already %d (unchanged)\n", r, T); out = ADV_OK
  :: T < fence[r] -> printf("@@ note sink : advance of resource %d to %d refused (fence %d)\n", r, T, fence[r]); out = ADV_REFUSED
  fi
}

/* Sink: POST /v1/writes. Token check, result-id check and store are one atomic step. */
inline sink_write(r, T, t, p, out) {
  if
  :: WRITE_OK(T, fence[r]) ->
       assert(T >= fence[r]);                 /* stale-write-accepted */
       assert(T <= fence[r]);                 /* unissued-token-accepted (a token above the fence) */
       assert(T >= lacc[r]);                  /* accepted-token-regressed */
       lacc[r] = T;
       if
       :: r_pay[t] == 0 -> r_pay[t] = p; out = W_WRITTEN
       :: r_pay[t] != 0 && r_pay[t] == p -> out = W_REPLAYED
       :: r_pay[t] != 0 && r_pay[t] != p ->
#ifdef BAD_OVERWRITE_RESULT
            r_pay[t] = p; out = W_WRITTEN
#else
            out = W_CONFLICT
#endif
       fi
  :: !WRITE_OK(T, fence[r]) && T < fence[r] -> out = W_STALE
  :: !WRITE_OK(T, fence[r]) && T >= fence[r] -> out = W_FENCE
  fi;
  if
  :: out == W_WRITTEN -> printf("@@ note sink : written (token %d, fence %d)\n", T, fence[r])
  :: out == W_REPLAYED -> printf("@@ note sink : replayed (token %d, fence %d)\n", T, fence[r])
  :: out == W_CONFLICT -> printf("@@ note sink : RESULT_CONFLICT (token %d, fence %d)\n", T, fence[r])
  :: out == W_STALE -> printf("@@ note sink : STALE_TOKEN (token %d < fence %d)\n", T, fence[r])
  :: out == W_FENCE -> printf("@@ note sink : FENCE_CONFLICT (token %d > fence %d)\n", T, fence[r])
  fi;
  assert(ack[t] == 0 || r_pay[t] == ack[t])   /* acknowledged-write-lost */
}

/* The acquire's answer reaches worker w, if it still waits for coordinator c (else it is lost). */
inline answer(w, c, out, t, T) {
  if
  :: w_wait[w] == c ->
       w_wait[w] = NONE;
       if
       :: out == R_GRANT ->
            printf("@@ C%d -> W%d : lease.granted task %d resource %d token %d\n", c, w, t, RES(t), T);
            assert(fence[RES(t)] >= T);       /* grant-before-fence */
#ifdef LIVENESS
            if :: o_crev[RES(t)] == T -> gr[t] = 1 :: else -> skip fi;   /* a live grant reached a worker */
#endif
            /* The SDK's deadline check is not safety (non-guarantee N2): the model lets it pass at
               once, so the write may go out at any later time, however long the worker pauses. */
            w_t[w] = t; w_tok[w] = T; w_ph[w] = P_CHECKED;   /* its request id is w_q[w] - 1 */
            w_q[w]++
       :: out == R_RETRY ->                   /* retryable: the same request id again */
            printf("@@ C%d -> W%d : UNAVAILABLE (request %d is retried)\n", c, w, w_q[w])
       :: out != R_GRANT && out != R_RETRY -> /* a definite answer: the next request id */
            if
            :: out == R_NONE -> printf("@@ C%d -> W%d : lease.none\n", c, w)
            :: out == R_EXPIRED -> printf("@@ C%d -> W%d : SESSION_EXPIRED\n", c, w)
            :: else -> printf("@@ C%d -> W%d : NOT_HOLDER\n", c, w)
            fi;
            w_q[w]++;
            /* The SDK's rule (docs/protocol.md): a session answered expired is over for the worker;
               it never resumes it (finding F1: resuming it let a peer adopt a session whose grant
               the worker had been told it lost). */
#ifndef BAD_RESUME_AFTER_EXPIRED
            if :: out == R_EXPIRED -> drop_session(w) :: else -> skip fi
#else
            skip
#endif
       fi
  :: else -> skip
  fi
}

/* ================================================================= transactions
 * Each is one etcd transaction as the coordinator runs it. The comment above it carries the
 * `compares:` paragraph of that transaction's header in the code, word for word.
 */

/* txn createSession
   compares: sessions/<sid> absent (create_revision == 0)
   model: open_session (the etcd lease is granted in the same step; a fresh lease id is never in use) */
inline open_session(w, c, s) {
  s = w * NINC + w_inc[w];
  assert(!s_here[s]);
  w_inc[w]++;
  rev++; s_here[s] = 1; s_mrev[s] = rev; s_coord[s] = c; l_alive[s] = 1;
  ct_has[CI(c, s)] = 1; ct_end[CI(c, s)] = 0; ct_mrev[CI(c, s)] = rev; ct_v[CI(c, s)] = 2;
  w_ses[w] = s; w_conn[w] = c; w_q[w] = 0;
  printf("@@ W%d -> C%d : hello\n", w, c);
  printf("@@ C%d -> etcd : createSession s%d (its own lease) at revision %d\n", c, s, rev);
  s = 0
}

/* txn adoptSession
   compares: sessions/<sid> mod_revision == the revision just read (and checked by the caller: same
             worker id and incarnation, not ending)
   model: resume_adopt; the read is the earlier step RESUME_AT. `ending` is set only by
          closeSession, which is not modeled, so the model's sessions are never ending. */
inline resume_adopt(w, c, s, ok) {
#ifdef BAD_ADOPT_NO_MODREV
  ok = 1;
#else
  ok = (s_here[s] && s_mrev[s] == w_m[w]);
#endif
  if
  :: ok && l_alive[s] ->
       rev++; s_here[s] = 1; s_mrev[s] = rev; s_coord[s] = c;
       printf("@@ C%d -> etcd : adoptSession s%d (read at mod %d) -> mod %d\n", c, s, w_m[w], rev);
       assert(!s_dead[s]);                    /* renew-after-deadline: an ended session revived */
       if
       :: ct_has[CI(c, s)] ->                 /* this coordinator knew the session: heartbeat it */
            ct_mrev[CI(c, s)] = rev;
            if
            :: !ct_end[CI(c, s)] && BEFORE_DEADLINE(CI(c, s)) ->
                 assert(ct_v[CI(c, s)] >= 2); /* renew-after-deadline */
                 w_conn[w] = c;
                 printf("@@ C%d -> W%d : welcome (resumed)\n", c, w)
            :: else -> printf("@@ C%d -> W%d : SESSION_EXPIRED\n", c, w); drop_session(w)
            fi
       :: else ->                             /* adopted: SessionTable.open */
            ct_has[CI(c, s)] = 1; ct_end[CI(c, s)] = 0; ct_mrev[CI(c, s)] = rev; ct_v[CI(c, s)] = 2;
            w_conn[w] = c;
            printf("@@ C%d -> W%d : welcome (resumed)\n", c, w)
       fi
  :: else ->                                  /* compare failed (or the lease is gone): read again */
       printf("@@ C%d -> etcd : adoptSession s%d (read at mod %d) failed\n", c, s, w_m[w])
  fi;
  ok = 0
}

/* txn grantOwners
   compares: per job: owners/<r> absent; tasks/<t> mod_revision == read (still pending, unchanged);
             sessions/<sid> mod_revision == known (session alive and served here);
             holdings/<sid>/<q> absent (this request id holds no grant)
   model: the A_TXN steps of Acquirer, one job per txn (a batch has the same compares per job) */
#ifdef BAD_NO_OWNER_ABSENT
#define OWNER_ABSENT(r) (1)
#else
#define OWNER_ABSENT(r) (o_crev[r] == 0)
#endif
#define GRANT_COMPARES(k) \
  (OWNER_ABSENT(RES(a_t[k])) && t_mrev[a_t[k]] == a_m[k] && s_here[a_s[k]] && s_mrev[a_s[k]] == a_sm[k] && \
   h_crev[HI(a_s[k], a_q[k])] == 0)

inline grant_put(k) {
  rev++; a_T[k] = rev;
  printf("@@ C%d -> etcd : grantOwners task %d for s%d -> owners/%d put, token %d\n", c, a_t[k], a_s[k], RES(a_t[k]), rev);
  /* A new owner interval begins while the previous one has not ended (the key is there); etcd then
     keeps the key's create_revision, so the new token is no owner key's revision. */
  assert(o_crev[RES(a_t[k])] == 0);           /* two-live-owners */
  o_crev[RES(a_t[k])] = rev;
  o_mrev[RES(a_t[k])] = rev; o_ses[RES(a_t[k])] = a_s[k];
  h_crev[HI(a_s[k], a_q[k])] = rev; h_task[HI(a_s[k], a_q[k])] = a_t[k];
  t_mrev[a_t[k]] = rev
}

/* txn abandonAttempt
   compares: owners/<r> create_revision == R; holdings/<sid>/<q> create_revision == R;
             tasks/<t> mod_revision == R (the record is still the one the grant wrote)
   model: the A_ABANDON step of Acquirer: tried first; it also rewrites the task (the attempt given
          back), which moves the task's mod_revision like any task write */
/* txn abandonGrant
   compares: owners/<r> create_revision == R (still ours); holdings/<sid>/<q> create_revision == R
   model: the A_ABANDON step of Acquirer when abandonAttempt fails, with forgetRequest in the same
          step when it fails too */
/* txn forgetRequest
   compares: holdings/<sid>/<q> create_revision == R
   model: the A_ABANDON step of Acquirer */
inline abandon_txn(k) {
  if
  :: o_crev[RES(a_t[k])] == a_T[k] && h_crev[HI(a_s[k], a_q[k])] == a_T[k] && t_mrev[a_t[k]] == a_T[k] ->
       rev++; del_owner(RES(a_t[k])); h_crev[HI(a_s[k], a_q[k])] = 0; h_task[HI(a_s[k], a_q[k])] = 0;
       t_mrev[a_t[k]] = rev;
       printf("@@ C%d -> etcd : abandonAttempt token %d (owner and holding deleted, task rewritten)\n", c, a_T[k])
  :: o_crev[RES(a_t[k])] == a_T[k] && h_crev[HI(a_s[k], a_q[k])] == a_T[k] && t_mrev[a_t[k]] != a_T[k] ->
       rev++; del_owner(RES(a_t[k])); h_crev[HI(a_s[k], a_q[k])] = 0; h_task[HI(a_s[k], a_q[k])] = 0;
       printf("@@ C%d -> etcd : abandonGrant token %d (owner and holding deleted)\n", c, a_T[k])
  :: else ->
       if
       :: h_crev[HI(a_s[k], a_q[k])] == a_T[k] ->
            rev++; h_crev[HI(a_s[k], a_q[k])] = 0; h_task[HI(a_s[k], a_q[k])] = 0;
            printf("@@ C%d -> etcd : forgetRequest token %d (holding deleted)\n", c, a_T[k])
       :: else -> printf("@@ C%d -> etcd : abandonGrant / forgetRequest token %d: nothing left\n", c, a_T[k])
       fi
  fi
}

/* txn finishAttempts
   compares: per job: owners/<r> create_revision == token and mod_revision == token and
             lease == session lease (this session holds this token); holdings/<sid>/<q>
             create_revision == token; tasks/<t> mod_revision == the one known (unchanged since
             read: the record written is computed from it)
   model: complete, one job per txn (a batch is all or nothing with the same compares per job; a
          release or a reported failure has the same compares and writes a pending / failed record
          instead, which a modeled handler never does). The task is read in the same step, so its compare always holds here; the task
          changes only by a grant or a completion, which the owner compares already exclude. */
inline complete(w, c, s, r, t, T, q) {
  if
  :: LIVE(c, s) && o_crev[r] == T && o_mrev[r] == T && o_ses[r] == s && h_crev[HI(s, q)] == T ->
       rev++; del_owner(r); h_crev[HI(s, q)] = 0; h_task[HI(s, q)] = 0;
       t_done[t] = 1; t_mrev[t] = rev;
       printf("@@ W%d -> C%d : task.complete task %d token %d\n", w, c, t, T);
       printf("@@ C%d -> etcd : finishAttempts -> task %d completed, owners/%d deleted\n", c, t, r)
  :: !LIVE(c, s) ->                           /* LEASE_EXPIRED: the session is over for the worker */
       printf("@@ W%d -> C%d : task.complete task %d token %d\n", w, c, t, T);
       printf("@@ C%d -> W%d : LEASE_EXPIRED (the session deadline has passed)\n", c, w);
#ifndef BAD_RESUME_AFTER_EXPIRED
       drop_session(w)
#else
       skip
#endif
  :: else ->                                  /* NOT_HOLDER: left to the next holder */
       printf("@@ W%d -> C%d : task.complete task %d token %d\n", w, c, t, T);
       printf("@@ C%d -> W%d : NOT_HOLDER (finishAttempts compares failed)\n", c, w)
  fi
}

/* txn endSession
   compares: per session: sessions/<sid> mod_revision == the one this coordinator knows (it still
             serves it); owners/<r> create_revision == token, for each holding read just before (or
             taken from the watch-fed index); with `knownUpTo` V (holdings taken from an index
             complete up to V): every holdings/<sid>/* create_revision < V + 1, so no holding the
             index has not seen can survive the delete (owner and holding keys are created and
             deleted together); per settlement tasks/<t> mod_revision == T, the token of a held owner
             key (the record the grant of T wrote: its attempt is open and nothing closed it), as
             settleLostAttempt compares — whose other compare (that owner key gone) this txn makes
             true itself
   model: the endSession step of Coordinator. The owner list is e_mask[c], read at revision
          e_V[c]; an owner key present now with create_revision <= V is the one the index saw.
          Several sessions' ends may share one etcd txn, a nested txn each, each judged on the
          store before the txn: for each session exactly what its own txn at that point would do,
          so the model's one end per step covers it (as for grantOwners' batches).
          The settlements are not modeled, as settleLostAttempt is not: they rewrite task records
          only (no owner, holding or fence changes), and made atomic with the end they remove
          interleavings; a settlement compare that fails fails the end, an outcome (changed) the
          model's end already has. */
#define END_COMPARES(c, s) \
  (s_here[s] && s_mrev[s] == ct_mrev[CI(c, s)] && \
   (((e_mask[c] & 1) == 0) || (o_crev[0] != 0 && o_crev[0] <= e_V[c])) && \
   (((e_mask[c] & 2) == 0) || (o_crev[1] != 0 && o_crev[1] <= e_V[c])) && \
   h_crev[HI(s, 0)] <= e_V[c] && (NQ < 2 || h_crev[HI(s, 1)] <= e_V[c]) && \
   (NQ < 3 || h_crev[HI(s, 2)] <= e_V[c]))

/* The transactions the model does not run. Their compares are tied here all the same, so a change
   to one is a prompt to look again.

   txn closeSession
   compares: sessions/<sid> mod_revision == the one this coordinator knows (it still serves it)
   model: not modeled — only for a session holding more than 120 owner keys (MAX_END_SESSION_OWNERS)

   txn submitTasks
   compares: every tasks/<t> absent
   model: not modeled — the NT tasks exist from the start (revision 1); the payload's key
          inputs/<t> is written by the same txn and read back inside the grant txn (a get: no
          compare, no write), so the grant's compares and writes are the model's

   txn settleLostAttempt
   compares: tasks/<t> mod_revision == T (still the record the grant of token T wrote: the attempt
             is open and nothing else closed it); owners/<r> create_revision != T (that grant's
             owner key is gone — absent, or another grant's)
   model: not modeled — it only rewrites the task record of an attempt whose owner key is gone (no
          owner, holding or fence changes); a grant racing it fails its task compare, an outcome
          the model's grant already has (another coordinator's grant moved the task)

   txn retryTask
   compares: tasks/<t> mod_revision == read (still the failed record the caller saw)
   model: not modeled — the model has no attempt budget, so no task fails

   txn purgeTasks
   compares: per task: tasks/<t> mod_revision == read (unchanged: still terminal, not retried since)
   model: not modeled — deletes terminal tasks only, with their payload and history keys (no owner,
          holding or fence changes); the retention sweeps run it too, from the index's ended
          tasks, under locks/retention (a lock for work, not safety: the compare decides)

   txn migrateTasks
   compares: every tasks/<t> mod_revision == read (still the v1 record read)
   model: not modeled — rewrites records of key layout v1 without an open attempt (payload and
          history moved to their own keys): no owner, holding, session or fence changes, and a
          record with an open attempt (whose mod_revision is its token) is never converted here

   txn acquireLock
   compares: locks/<name> absent
   model: not modeled — the retention sweeper's and the layout converter's lock (one coordinator
          does the work at a time); nothing safety-relevant depends on it

   txn revokeConsoleSession
   compares: console/revoked/<loginId> absent (a second logout of the same login writes nothing)
   model: not modeled — the web console's logout (no owner, holding, task or fence changes)

   txn cancelTask
   compares: tasks/<t> mod_revision == read (a grant rewrites the task, so a grant in between
             fails this); if the task is leased: owners/<r> create_revision == the holder's token
   model: not modeled — the model has no cancellation
*/

/* ================================================================= processes
 * Every step is a d_step: one transition, no intermediate states. Nondeterministic choices (which
 * coordinator, which candidate, a fault or not) are separate options of a process's loop.
 */

/* Acquire handler k back to idle. */
inline a_reset(k) {
  a_q[k] = NONE; a_s[k] = 0; a_pc[k] = 0; a_t[k] = 0; a_m[k] = 0; a_sm[k] = 0; a_T[k] = 0; a_fresh[k] = 0;
  a_out[k] = 0
}

/* After the fence advance (step b): deliver if the session is still live here (step c), or abandon,
   or answer UNAVAILABLE. */
inline after_advance(k, out) {
  if
  :: out == ADV_OK ->
       if
       :: LIVE(c, a_s[k]) -> answer(w, c, R_GRANT, a_t[k], a_T[k]); a_reset(k)
       :: else ->
            /* as coded (GrantService.#fenceAndDeliver): SESSION_EXPIRED, and the owner key stays for
               the session's end to remove (docs/model.md, finding F1) */
            answer(w, c, R_EXPIRED, a_t[k], a_T[k]); a_reset(k)
       fi
  :: out == ADV_REFUSED ->
       if
       :: a_fresh[k] -> a_out[k] = R_NONE
       :: else -> a_out[k] = R_NOTHOLDER
       fi;
       a_pc[k] = A_ABANDON
  :: out == ADV_ERR ->
       if
       :: a_fresh[k] -> a_out[k] = R_RETRY; a_pc[k] = A_ABANDON
       :: else -> answer(w, c, R_RETRY, a_t[k], a_T[k]); a_reset(k)  /* a replayed grant may be in the worker's hands */
       fi
  fi;
  out = 0
}

/*
 * Coordinator c's acquire handler for worker w (GrantService): the grant txn (step a), the fence
 * advance (b) and the delivery (c) — or the abandon. The request arrives with the worker's acquire
 * step, which also selects the candidate from c's index. A handler keeps running after its worker
 * went to the other coordinator; a crash-restart of c wipes it.
 */
proctype Acquirer(byte c; byte w) {
end_a:
  do
  :: /* grantOwners does not reach etcd: UNAVAILABLE */
     d_step {
       STEP(A_TXN) && FAULT_OK(f_etcd) ->
       FAULT_USED(f_etcd); printf("@@ C%d -> etcd : grantOwners (unreachable)\n", c);
       answer(w, c, R_RETRY, 0, 0); a_reset(AK_); CANON
     }
  :: /* grantOwners applies, but its reply is lost: UNAVAILABLE */
     d_step {
       STEP(A_TXN) && FAULT_OK(f_etcd) && GRANT_COMPARES(AK_) ->
       FAULT_USED(f_etcd); grant_put(AK_); printf("@@ note C%d : the reply of grantOwners is lost\n", c);
       answer(w, c, R_RETRY, 0, 0); a_reset(AK_); CANON
     }
  :: /* grantOwners succeeds: the token is its revision */
     d_step { STEP(A_TXN) && GRANT_COMPARES(AK_) -> grant_put(AK_); a_fresh[AK_] = 1; a_pc[AK_] = A_FENCE; CANON }
  :: /* grantOwners fails: what its failure branch read decides */
     d_step {
       STEP(A_TXN) && !GRANT_COMPARES(AK_) ->
       printf("@@ C%d -> etcd : grantOwners task %d for s%d failed\n", c, a_t[AK_], a_s[AK_]);
       if
       :: h_crev[HI(a_s[AK_], a_q[AK_])] != 0 ->             /* the request id holds a grant: replay it */
            a_T[AK_] = h_crev[HI(a_s[AK_], a_q[AK_])]; a_t[AK_] = h_task[HI(a_s[AK_], a_q[AK_])];
            a_pc[AK_] = A_REPLAY
       :: else ->
            if
            :: !s_here[a_s[AK_]] || s_mrev[a_s[AK_]] != a_sm[AK_] -> answer(w, c, R_EXPIRED, 0, 0)
            :: else -> answer(w, c, R_RETRY, 0, 0)           /* raced: the worker asks again */
            fi;
            a_reset(AK_)
       fi;
       CANON
     }
#ifdef BAD_GRANT_BEFORE_ADVANCE
  :: /* the sabotage: the grant goes out now, the fence advance follows */
     d_step { (STEP(A_FENCE) || STEP(A_REPLAY)) -> answer(w, c, R_GRANT, a_t[AK_], a_T[AK_]); a_pc[AK_] = A_LATE_ADVANCE; CANON }
  :: d_step {
       STEP(A_LATE_ADVANCE) ->
       printf("@@ C%d -> sink : advance resource %d to %d (late)\n", c, RES(a_t[AK_]), a_T[AK_]);
       sink_advance(RES(a_t[AK_]), a_T[AK_], x_out); x_out = 0; a_reset(AK_); CANON
     }
#else
  :: /* step (b), the fence advance: the sink is unreachable */
     d_step {
       STEP(A_FENCE) && FAULT_OK(f_sink) ->
       FAULT_USED(f_sink); printf("@@ C%d -> sink : advance resource %d to %d (unreachable)\n", c, RES(a_t[AK_]), a_T[AK_]);
       x_out = ADV_ERR; after_advance(AK_, x_out); CANON
     }
  :: /* step (b): the sink advances, but the reply is lost */
     d_step {
       STEP(A_FENCE) && FAULT_OK(f_sink) ->
       FAULT_USED(f_sink); printf("@@ C%d -> sink : advance resource %d to %d\n", c, RES(a_t[AK_]), a_T[AK_]);
       sink_advance(RES(a_t[AK_]), a_T[AK_], x_out); printf("@@ note C%d : the reply of the advance is lost\n", c);
       x_out = ADV_ERR; after_advance(AK_, x_out); CANON
     }
  :: /* step (b): advanced (or unchanged) — then step (c) — or refused */
     d_step {
       STEP(A_FENCE) ->
       printf("@@ C%d -> sink : advance resource %d to %d\n", c, RES(a_t[AK_]), a_T[AK_]);
       sink_advance(RES(a_t[AK_]), a_T[AK_], x_out); after_advance(AK_, x_out); CANON
     }
  :: /* a recorded grant: read owners/<r>; if it is still this session's, steps (b) and (c) again */
     d_step {
       STEP(A_REPLAY) ->
       if
       :: o_crev[RES(a_t[AK_])] == a_T[AK_] && o_ses[RES(a_t[AK_])] == a_s[AK_] ->
            a_fresh[AK_] = 0;
            printf("@@ C%d -> sink : advance resource %d to %d (replay)\n", c, RES(a_t[AK_]), a_T[AK_]);
            sink_advance(RES(a_t[AK_]), a_T[AK_], x_out); after_advance(AK_, x_out)
       :: else -> answer(w, c, R_NOTHOLDER, 0, 0); a_reset(AK_)
       fi;
       CANON
     }
#endif
  :: /* abandonGrant, else forgetRequest; then the answer */
     d_step { STEP(A_ABANDON) -> abandon_txn(AK_); answer(w, c, a_out[AK_], 0, 0); a_reset(AK_); CANON }
  od
}

/* (inside Coordinator(c)) start #end of the lowest ending session: its owner list from the
   watch-fed index, which is complete up to V = rev */
inline start_end(c, s, r) {
  s = 0;
  do
  :: ENDING(s) -> break
  :: else -> s++
  od;
  e_s[c] = s; e_V[c] = rev; e_mask[c] = 0;
  for (r : 0 .. NR - 1) {
    if :: o_crev[r] != 0 && o_ses[r] == s -> e_mask[c] = e_mask[c] | (1 << r) :: else -> skip fi
  };
  printf("@@ note C%d : s%d ends (deadline); owners from the index at revision %d\n", c, s, rev);
  s = 0; r = 0
}

/*
 * Coordinator c's own work: session deadlines (takeDue; #end: endSession, tell the worker, revoke
 * the lease), the watch (a peer adopted a session), a lost lease, a crash-restart.
 */
proctype Coordinator(byte c) {
end_c:
  do
  :: /* takeDue: every live session whose deadline is reached (now >= deadline) starts ending; #end
        of the first one starts */
     d_step {
       ANY_S(DUE) ->
       for (x_s : 0 .. NS - 1) { if :: DUE(x_s) -> ct_end[CI(c, x_s)] = 1 :: else -> skip fi };
       if :: e_s[c] == NONE -> start_end(c, x_s, x_r) :: else -> skip fi;
       x_s = 0;
       CANON
     }
  :: /* #end of the next ending session */
     d_step { e_s[c] == NONE && ANY_S(ENDING) -> start_end(c, x_s, x_r); CANON }
  :: /* endSession; then lease.revoked + session.expired to the worker (the revoke is the next step) */
     d_step {
       e_s[c] != NONE && !e_rv[c] ->
       x_s = e_s[c];
       if
       :: END_COMPARES(c, x_s) ->
            rev++;
            for (x_r : 0 .. NR - 1) { if :: (e_mask[c] & (1 << x_r)) != 0 -> del_owner(x_r) :: else -> skip fi };
            for (x_q : 0 .. NQ - 1) { h_crev[HI(x_s, x_q)] = 0; h_task[HI(x_s, x_q)] = 0 };
            s_here[x_s] = 0; s_mrev[x_s] = 0; s_coord[x_s] = NONE;
            s_dead[x_s] = 1;
            printf("@@ C%d -> etcd : endSession s%d -> its owner keys and session key deleted at %d\n", c, x_s, rev);
            if
            :: w_conn[OWNER_OF(x_s)] == c && w_ses[OWNER_OF(x_s)] == x_s ->
                 printf("@@ C%d -> W%d : lease.revoked, session.expired\n", c, OWNER_OF(x_s))
            :: else -> skip
            fi;
            tell_expired(c, x_s);
            forget(c, x_s); e_rv[c] = 1; e_V[c] = 0; e_mask[c] = 0
       :: else ->
            if
            :: !s_here[x_s] ->                                    /* gone: already ended */
                 printf("@@ C%d -> etcd : endSession s%d: already gone\n", c, x_s);
                 tell_expired(c, x_s);
                 forget(c, x_s); e_rv[c] = 1; e_V[c] = 0; e_mask[c] = 0
            :: s_here[x_s] && s_mrev[x_s] != ct_mrev[CI(c, x_s)] ->   /* moved: a peer adopted it */
                 printf("@@ C%d -> etcd : endSession s%d: moved to a peer, not ended\n", c, x_s);
                 close_channel(c, x_s);
                 forget(c, x_s); e_s[c] = NONE; e_V[c] = 0; e_mask[c] = 0
            :: else ->                                          /* the index lagged: read the holdings */
                 printf("@@ C%d -> etcd : endSession s%d failed (index behind); reads the holdings\n", c, x_s);
                 e_V[c] = rev; e_mask[c] = 0;
                 for (x_r : 0 .. NR - 1) {
                   if :: o_crev[x_r] != 0 && o_ses[x_r] == x_s -> e_mask[c] = e_mask[c] | (1 << x_r) :: else -> skip fi
                 }
            fi
       fi;
       x_s = 0; x_r = 0; x_q = 0;
       CANON
     }
  :: /* the lease revoke after #end: every key still attached to the lease goes */
     d_step {
       e_rv[c] ->
       x_s = e_s[c];
       if
       :: l_alive[x_s] ->
            printf("@@ C%d -> etcd : revoke the lease of s%d\n", c, x_s);
            lease_end(x_s, x_r, x_q, x_any)
       :: else -> skip
       fi;
       e_s[c] = NONE; e_rv[c] = 0; x_s = 0;
       CANON
     }
  :: /* the watch: a peer rewrote sessions/<s> (adopted it) after this coordinator did */
     d_step {
       ANY_S(MOVED) ->
       x_s = 0;
       do
       :: MOVED(x_s) -> break
       :: else -> x_s++
       od;
       printf("@@ note C%d : the watch shows s%d adopted by a peer; stops serving it\n", c, x_s);
       close_channel(c, x_s); forget(c, x_s); x_s = 0;
       CANON
     }
  :: /* the keepalive stream: the session's etcd lease is gone */
     d_step {
       ANY_S(LOST) ->
       x_s = 0;
       do
       :: LOST(x_s) -> break
       :: else -> x_s++
       od;
       printf("@@ note C%d : the lease of s%d is gone\n", c, x_s);
       tell_expired(c, x_s); forget(c, x_s); x_s = 0;
       CANON
     }
  :: /* crash-restart: memory gone, sockets closed, handlers gone; etcd and the sink keep everything */
     d_step {
       FAULT_OK(f_crash) && CRASH_MATTERS ->
       FAULT_USED(f_crash);
       printf("@@ note C%d : crash and restart\n", c);
       for (x_s : 0 .. NS - 1) { forget(c, x_s) };
       e_s[c] = NONE; e_V[c] = 0; e_mask[c] = 0; e_rv[c] = 0;
       for (x_r : 0 .. NW - 1) {
         a_reset(AK(c, x_r));
         if :: w_conn[x_r] == c -> w_conn[x_r] = NONE :: else -> skip fi;
         if :: w_wait[x_r] == c -> w_wait[x_r] = NONE :: else -> skip fi;
         if :: w_rc[x_r] == c -> w_rc[x_r] = NONE; w_m[x_r] = 0 :: else -> skip fi
       };
       x_s = 0; x_r = 0;
       CANON
     }
  od
}

/* (inside Worker(w)) hello to coordinator C: open a session (createSession) */
#define OPEN_ON(C) \
  d_step { w_ses[w] == NONE && w_ph[w] == P_IDLE && w_inc[w] < NINC -> open_session(w, C, x_s); CANON }
/* (inside Worker(w)) hello {resumeSessionId} to coordinator C: the session key is read */
#define RESUME_AT(C) \
  d_step { \
    w_ses[w] != NONE && w_conn[w] == NONE && w_rc[w] == NONE -> \
    x_s = w_ses[w]; \
    printf("@@ W%d -> C%d : hello (resume s%d)\n", w, C, x_s); \
    if \
    :: ct_has[CI(C, x_s)] && !LIVE(C, x_s) -> printf("@@ C%d -> W%d : SESSION_EXPIRED\n", C, w); drop_session(w) \
    :: else -> \
         if \
         :: !s_here[x_s] -> printf("@@ C%d -> W%d : SESSION_EXPIRED (no such session)\n", C, w); drop_session(w) \
         :: else -> \
              printf("@@ C%d -> etcd : read sessions/s%d (mod %d)\n", C, x_s, s_mrev[x_s]); \
              w_m[w] = s_mrev[x_s]; w_rc[w] = C \
         fi \
    fi; \
    x_s = 0; \
    CANON \
  }
#define ACQ_READY \
  (w_conn[w] != NONE && w_ses[w] != NONE && w_ph[w] == P_IDLE && w_wait[w] == NONE && w_q[w] < NQ && \
   a_q[AK(w_conn[w], w)] == NONE)
/* (inside Worker(w)) lease.acquire: the coordinator's index offers task T; the grant txn is next */
#define ACQUIRE_TASK(T) \
  d_step { \
    ACQ_READY && LIVE(w_conn[w], w_ses[w]) && CAND(T) -> \
    x_c = w_conn[w]; x_s = w_ses[w]; w_wait[w] = x_c; \
    a_q[AK(x_c, w)] = w_q[w]; a_s[AK(x_c, w)] = x_s; a_pc[AK(x_c, w)] = A_TXN; \
    a_sm[AK(x_c, w)] = ct_mrev[CI(x_c, x_s)]; a_t[AK(x_c, w)] = T; a_m[AK(x_c, w)] = t_mrev[T]; \
    printf("@@ W%d -> C%d : lease.acquire (request %d)\n", w, x_c, w_q[w]); \
    printf("@@ note C%d : its index offers task %d (mod %d)\n", x_c, T, t_mrev[T]); \
    x_c = 0; x_s = 0; \
    CANON \
  }

/*
 * Worker w running the SDK: one session at a time, one grant at a time. Every step can be delayed
 * arbitrarily (a GC pause, SIGSTOP), in particular between the deadline check and the write.
 */
proctype Worker(byte w) {
end_w:
  do
  :: OPEN_ON(0)
  :: OPEN_ON(1)
  :: /* the connection breaks (a fault) */
     d_step {
       w_conn[w] != NONE && FAULT_OK(f_disc) ->
       printf("@@ note W%d : connection to C%d lost\n", w, w_conn[w]);
       FAULT_USED(f_disc); w_conn[w] = NONE; w_wait[w] = NONE;
       CANON
     }
  :: RESUME_AT(0)
  :: RESUME_AT(1)
  :: /* ... and the session is adopted (adoptSession) */
     d_step {
       w_rc[w] != NONE ->
       x_c = w_rc[w];
       resume_adopt(w, x_c, w_ses[w], x_ok);
       w_rc[w] = NONE; w_m[w] = 0; x_c = 0;
       CANON
     }
  :: /* heartbeat (lease.renew while holding a grant): accepted while now < deadline, which it
        moves (the deadline can still be reached at any later moment). Taken only when it changes
        something: when it is refused, or finds the lease lost */
     d_step {
       w_conn[w] != NONE && w_ses[w] != NONE &&
       (!LIVE(w_conn[w], w_ses[w]) ||
        (w_ph[w] == P_WRITTEN && !(o_crev[RES(w_t[w])] == w_tok[w] && o_ses[RES(w_t[w])] == w_ses[w]))) ->
       x_c = w_conn[w]; x_s = w_ses[w];
       printf("@@ W%d -> C%d : heartbeat / lease.renew (s%d)\n", w, x_c, x_s);
       if
       :: ct_has[CI(x_c, x_s)] && !ct_end[CI(x_c, x_s)] && BEFORE_DEADLINE(CI(x_c, x_s)) ->
            assert(ct_v[CI(x_c, x_s)] >= 2 && !s_dead[x_s]);   /* renew-after-deadline */
            if
            :: w_ph[w] == P_WRITTEN && !(o_crev[RES(w_t[w])] == w_tok[w] && o_ses[RES(w_t[w])] == x_s) ->
                 printf("@@ C%d -> W%d : NOT_HOLDER (lease lost)\n", x_c, w);
                 drop_grant(w)
            :: else -> printf("@@ C%d -> W%d : renewed\n", x_c, w)
            fi
       :: else -> printf("@@ C%d -> W%d : SESSION_EXPIRED\n", x_c, w); drop_session(w)
       fi;
       x_c = 0; x_s = 0;
       CANON
     }
  :: /* lease.acquire at a coordinator whose table says the session is not live */
     d_step {
       ACQ_READY && !LIVE(w_conn[w], w_ses[w]) ->
       x_c = w_conn[w]; w_wait[w] = x_c;
       printf("@@ W%d -> C%d : lease.acquire (request %d)\n", w, x_c, w_q[w]);
       answer(w, x_c, R_EXPIRED, 0, 0); x_c = 0
     }
#ifndef LIVENESS
  :: /* lease.acquire: nothing grantable and the request id holds no grant: lease.none. The code
        reads holdings/<sid>/<q>, or knows it absent without a read when every request of the
        session arrived on its current connection since it was opened there and <q> is none of
        the grants it holds (core/grant-decisions needsRequestRead): the same fact either way. */
     d_step {
       ACQ_READY && LIVE(w_conn[w], w_ses[w]) && !ANY_CAND && h_crev[HI(w_ses[w], w_q[w])] == 0 ->
       x_c = w_conn[w]; w_wait[w] = x_c;
       printf("@@ W%d -> C%d : lease.acquire (request %d)\n", w, x_c, w_q[w]);
       answer(w, x_c, R_NONE, 0, 0); x_c = 0
     }
#endif
  :: /* lease.acquire: nothing grantable, but the request id holds a grant (a retry): replay it */
     d_step {
       ACQ_READY && LIVE(w_conn[w], w_ses[w]) && !ANY_CAND && h_crev[HI(w_ses[w], w_q[w])] != 0 ->
       x_c = w_conn[w]; x_s = w_ses[w]; w_wait[w] = x_c;
       printf("@@ W%d -> C%d : lease.acquire (request %d, a retry)\n", w, x_c, w_q[w]);
       a_q[AK(x_c, w)] = w_q[w]; a_s[AK(x_c, w)] = x_s; a_pc[AK(x_c, w)] = A_REPLAY;
       a_T[AK(x_c, w)] = h_crev[HI(x_s, w_q[w])]; a_t[AK(x_c, w)] = h_task[HI(x_s, w_q[w])];
       x_c = 0; x_s = 0;
       CANON
     }
  :: ACQUIRE_TASK(0)
  :: ACQUIRE_TASK(1)
  :: ACQUIRE_TASK(2)
  :: /* the write, sent after any pause since the grant and its deadline check (POST /v1/writes) */
     d_step {
       w_ph[w] == P_CHECKED ->
       x_t = w_t[w];
       printf("@@ W%d -> sink : write task %d resource %d token %d\n", w, x_t, RES(x_t), w_tok[w]);
       sink_write(RES(x_t), w_tok[w], x_t, w + 1, x_out);
       if
       :: x_out == W_WRITTEN || x_out == W_REPLAYED -> ack[x_t] = w + 1
       :: else -> skip
       fi;
       if
       :: (x_out == W_WRITTEN || x_out == W_REPLAYED || x_out == W_CONFLICT) && w_ses[w] != NONE -> w_ph[w] = P_WRITTEN
       :: else -> drop_grant(w)     /* STALE_TOKEN / FENCE_CONFLICT (lost), or its session is gone */
       fi;
       x_t = 0; x_out = 0;
       CANON
     }
  :: /* task.complete (finishAttempts) */
     d_step {
       w_ph[w] == P_WRITTEN && w_conn[w] != NONE ->
       complete(w, w_conn[w], w_ses[w], RES(w_t[w]), w_t[w], w_tok[w], w_q[w] - 1);
       drop_grant(w);
       CANON
     }
  od
}

/* (inside Env) time: the deadline of table entry I (coordinator I / NS, session I % NS) is reached */
#ifdef LIVENESS
#define TICK_OK f_tick > 0 &&
#define TICK_USED f_tick--;
#else
#define TICK_OK
#define TICK_USED
#endif
#define REACH(I) \
  d_step { \
    TICK_OK NC * NS > I && TICKABLE(I) -> \
    TICK_USED \
    printf("@@ note C%d : the deadline of s%d is reached (its clock)\n", I / NS, I % NS); \
    ct_v[I] = 1 \
  }
/* (inside Env) the etcd lease of session X lapses (its keepalives stopped) */
#define LAPSE(X) \
  d_step { \
    NS > X && FAULT_OK(f_lapse) && l_alive[X] -> \
    printf("@@ note etcd : the lease of s%d lapses\n", X); \
    FAULT_USED(f_lapse); lease_end(X, x_r, x_q, x_any); CANON \
  }
/* (inside Env) a write to task X's resource with a token no grant carried (a "bigger number").
   Refused, it changes nothing, so it needs no budget. */
#define ROGUE_WRITE(X) \
  d_step { \
    printf("@@ rogue -> sink : write task %d resource %d token %d\n", X, RES(X), ROGUE_TOKEN); \
    sink_write(RES(X), ROGUE_TOKEN, X, 9, x_out); x_out = 0; CANON \
  }

/*
 * The environment: time (deadlines reached), etcd leases lapsing, a rogue writer.
 */
proctype Env() {
end_env:
  do
  :: REACH(0)
  :: REACH(1)
  :: REACH(2)
  :: REACH(3)
  :: REACH(4)
  :: REACH(5)
  :: REACH(6)
  :: REACH(7)
  :: REACH(8)
  :: REACH(9)
  :: REACH(10)
  :: REACH(11)
  :: LAPSE(0)
  :: LAPSE(1)
  :: LAPSE(2)
  :: LAPSE(3)
  :: LAPSE(4)
  :: LAPSE(5)
#ifndef LIVENESS
  :: ROGUE_WRITE(0)
  :: ROGUE_WRITE(1)
  :: ROGUE_WRITE(2)
#endif
  od
}

init {
  atomic {
    run Env();
    run Coordinator(0);
    run Coordinator(1);
    run Acquirer(0, 0);
    run Acquirer(1, 0);
#if NW > 1
    run Acquirer(0, 1);
    run Acquirer(1, 1);
#endif
#if NW > 2
    run Acquirer(0, 2);
    run Acquirer(1, 2);
#endif
    run Worker(0);
#if NW > 1
    run Worker(1);
#endif
#if NW > 2
    run Worker(2);
#endif
  }
}

#ifdef LIVENESS
/* Liveness: a task pending on a free resource, while some worker can still ask for work (the bounds
   NINC and NQ are not used up), is eventually granted (a live grant reaches a worker), or done, or
   no worker can ask any more. Checked with weak fairness (pan -a -f), one claim per task. */
#define PF(t) (!t_done[t] && o_crev[RES(t)] == 0)
#define CAN_ASK(w) ((w_ses[w] != NONE && w_q[w] < NQ) || (w_ses[w] == NONE && w_inc[w] < NINC))
#define CAN_WORK (CAN_ASK(0) || (NW > 1 && CAN_ASK(1)) || (NW > 2 && CAN_ASK(2)))
ltl granted_0 { [] ((PF(0) && CAN_WORK) -> <> (gr[0] || t_done[0] || !CAN_WORK)) }
ltl granted_1 { [] ((PF(1) && CAN_WORK) -> <> (gr[1] || t_done[1] || !CAN_WORK)) }
ltl granted_2 { [] ((PF(2) && CAN_WORK) -> <> (gr[2] || t_done[2] || !CAN_WORK)) }
#endif
