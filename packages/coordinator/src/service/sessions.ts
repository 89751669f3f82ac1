/**
 * Sessions served by this coordinator: open (one etcd lease each), resume/adopt, heartbeats,
 * keepalive, and the end of a session at its deadline (session-ending.ts).
 *
 * Expiry is judged here, by the injected monotonic clock ({@link SessionTable}). At the deadline
 * this coordinator — only if it still serves the session (its txn compares the session key's
 * mod_revision) — deletes every owner key of the session at one revision and revokes the lease.
 * The etcd lease (TTL a bit longer than the session TTL, kept alive over one stream) is only the
 * backstop when this coordinator dies.
 */
import { RepeatGate, type Clock, type Hello } from '@leasehold/protocol';
import { MicroBatcher } from '@leasehold/sink-client';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { CLOSE_GOING_AWAY, CLOSE_SESSION_MOVED } from '../core/dispatch.js';
import { sessionQueues } from '../core/queues.js';
import type { SessionRecord } from '../core/records.js';
import { keepaliveIntervalMs, resumeVerdict, type ExpiredReason } from '../core/session-resume.js';
import { SlotsByKey, type Slot } from '../core/slots.js';
import { SessionGrants } from '../core/session-grants.js';
import { SessionTable, type HeartbeatDecision } from '../core/session-table.js';
import type { OwnerEntry, TaskIndex } from '../core/task-index.js';
import { EarliestTimer, type Timers } from '../core/timers.js';
import { CoordinatorError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { EndArgs, LeaseStore, SessionLeaseKeeper } from '../store/port.js';
import type { WorkerChannel } from './channel.js';
import { leaseTtlSeconds, type CoordinatorState } from './context.js';
import type { LocalSession, SessionRegistry } from './local-session.js';
import { endAtDeadline, type EndSettlements, type SessionEndContext } from './session-ending.js';

export type { LocalSession } from './local-session.js';
export type { ExpiredReason } from '../core/session-resume.js';

/** What the session registry uses. */
export interface SessionsContext {
  readonly coordinatorId: string;
  readonly config: Pick<
    CoordinatorConfig,
    'sessionTtlMs' | 'maxSessionsPerWorker' | 'heartbeatIntervalMs' | 'etcdLeaseMarginMs'
  >;
  /** How long a session's end waits for its requests in flight (the sink timeout and a margin). */
  readonly inflightGraceMs: number;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'sessions' | 'expiries' | 'batchItems'>;
  readonly store: Pick<
    LeaseStore,
    | 'limits'
    | 'leaseKeeper'
    | 'openSession'
    | 'session'
    | 'adoptSession'
    | 'sessionHoldings'
    | 'endSessions'
    | 'closeSession'
    | 'revokeLease'
  >;
  readonly index: Pick<TaskIndex, 'ownersOf' | 'revision' | 'freeOwner'>;
  readonly state: Readonly<Pick<CoordinatorState, 'etcdUnreachable'>>;
}

/** Sessions one group-committed end call takes (the store splits it into txns of at most 16). */
const END_BATCH_MAX = 64;
/** Group-committed end calls running at once. */
const END_CALLS_IN_FLIGHT = 4;

type ResumeResult = { ok: true; session: LocalSession } | { ok: false; reason: ExpiredReason };

export interface OpenResult {
  readonly session: LocalSession;
  readonly resumed: boolean;
  /** Set when a resume was asked for but the old session could not be resumed. */
  readonly previous?: { readonly sessionId: string; readonly reason: ExpiredReason };
}

export class SessionManager implements SessionRegistry {
  readonly #ctx: SessionsContext;
  readonly #table: SessionTable;
  readonly #sessions = new Map<string, LocalSession>();
  /**
   * Sessions per worker id served here (MAX_SESSIONS_PER_WORKER): a slot is taken when a hello is
   * accepted — before the etcd calls that open or adopt the session — and given back when the
   * session is forgotten here (ended, moved to a peer, handed off) or the open fails.
   */
  readonly #perWorker: SlotsByKey;
  readonly #slots = new Map<string, Slot>();
  readonly #keepalive: SessionLeaseKeeper;
  #endContext: SessionEndContext;
  /** Fires at the earliest deadline of the sessions served here. */
  readonly #deadlines: EarliestTimer;
  #closed = false;
  #onOwnersFreed: (freed: readonly OwnerEntry[]) => void = () => undefined;
  readonly #repeats = new RepeatGate();

  constructor(ctx: SessionsContext) {
    this.#ctx = ctx;
    this.#table = new SessionTable(ctx.clock, ctx.config.sessionTtlMs);
    this.#deadlines = new EarliestTimer(
      ctx.timers,
      () => ctx.clock.nowMs(),
      () => {
        this.#onTimer();
      },
    );
    this.#perWorker = new SlotsByKey(ctx.config.maxSessionsPerWorker);
    const leaseMs = leaseTtlSeconds(ctx.config) * 1_000;
    this.#keepalive = ctx.store.leaseKeeper({
      intervalMs: keepaliveIntervalMs(ctx.config.heartbeatIntervalMs, leaseMs),
      onLost: (leaseId) => {
        this.#onLeaseLost(leaseId);
      },
    });
    // The end txns of one expiry wave share txns (the group commit gathers what arrives while
    // calls are in flight), each session judged on its own: a wave of 64 is a few txns, not 64.
    // Several calls at once, so that the ends of a wave whose deadlines trickle in do not queue
    // one round trip each behind a single call (a takeover waits for its holder's end).
    const ends = new MicroBatcher((batch: readonly EndArgs[]) => ctx.store.endSessions(batch), END_BATCH_MAX, {
      maxInFlight: END_CALLS_IN_FLIGHT,
      observe: (n) => {
        ctx.metrics.batchItems.observe({ kind: 'end_session' }, n);
      },
    });
    this.#endContext = {
      ...ctx,
      end: (args) => ends.submit(args),
      repeats: this.#repeats,
      leaseTtlSeconds: leaseTtlSeconds(ctx.config),
    };
  }

  start(): void {
    this.#keepalive.start();
  }

  /** Called when an ended session's owner keys were deleted (waiting acquires may now be granted). */
  onOwnersFreed(listener: (freed: readonly OwnerEntry[]) => void): void {
    this.#onOwnersFreed = listener;
  }

  /** Who records the attempts an end loses, in the end's own txn (the settle service). */
  foldSettlements(settlements: EndSettlements): void {
    this.#endContext = { ...this.#endContext, settlements };
  }

  get(sessionId: string): LocalSession | undefined {
    return this.#sessions.get(sessionId);
  }

  get keepaliveConnected(): boolean {
    return this.#keepalive.connected || this.#keepalive.size === 0;
  }

  isLive(session: LocalSession): boolean {
    return this.#sessions.get(session.sessionId) === session && this.#table.isLive(session.sessionId);
  }

  remainingMs(session: LocalSession): number {
    return this.#table.remainingMs(session.sessionId);
  }

  heartbeat(session: LocalSession, receivedAtMs: number): HeartbeatDecision {
    if (this.#sessions.get(session.sessionId) !== session) {
      return { ok: false, code: 'SESSION_EXPIRED', reason: 'unknown-session' };
    }
    return this.#table.heartbeat(session.sessionId, receivedAtMs);
  }

  /** Count `op` as in flight on the session: its end waits (bounded) for it. */
  track<T>(session: LocalSession, op: Promise<T>): Promise<T> {
    session.inflight.add(op);
    const done = (): void => {
      session.inflight.delete(op);
    };
    op.then(done, done);
    return op;
  }

  detach(session: LocalSession, channel: WorkerChannel): void {
    if (session.channel === channel) session.channel = undefined;
  }

  async open(hello: Hello, channel: WorkerChannel): Promise<OpenResult> {
    if (this.#closed) throw new CoordinatorError('SHUTTING_DOWN', 'coordinator is shutting down');
    if (this.#ctx.state.etcdUnreachable) {
      throw new CoordinatorError('UNAVAILABLE', 'this coordinator cannot reach etcd: connect to a peer');
    }
    let previous: OpenResult['previous'];
    if (hello.resumeSessionId !== undefined) {
      // Resuming a session served here adds none; adopting one from a peer adds one.
      const slot = this.#sessions.has(hello.resumeSessionId) ? undefined : this.#takeSlot(hello.workerId);
      let resumed: ResumeResult;
      try {
        resumed = await this.#resume(hello, hello.resumeSessionId, channel);
      } catch (err) {
        slot?.release();
        throw err;
      }
      if (resumed.ok) {
        this.#hold(resumed.session, slot);
        return { session: resumed.session, resumed: true };
      }
      slot?.release();
      previous = { sessionId: hello.resumeSessionId, reason: resumed.reason };
    }
    const slot = this.#takeSlot(hello.workerId);
    let session: LocalSession;
    try {
      session = await this.#create(hello, channel);
    } catch (err) {
      slot.release();
      throw err;
    }
    this.#hold(session, slot);
    return { session, resumed: false, ...(previous === undefined ? {} : { previous }) };
  }

  /** One of the worker's session slots, taken now (synchronously, before any await), or LIMIT_REACHED. */
  #takeSlot(workerId: string): Slot {
    const slot = this.#perWorker.tryTake(workerId);
    if (slot !== undefined) return slot;
    const max = this.#perWorker.max;
    const gate = this.#repeats.note(`limit ${workerId}`, this.#ctx.clock.nowMs());
    if (gate.log) {
      this.#ctx.log.warn(
        { workerId, max, repeated: gate.suppressed },
        'hello refused: too many sessions of this worker',
      );
    }
    throw new CoordinatorError('LIMIT_REACHED', `worker ${workerId} already has ${max} sessions on this coordinator`);
  }

  /** `session` is served here now: it keeps `slot` (a session that already had one gives it back). */
  #hold(session: LocalSession, slot: Slot | undefined): void {
    if (slot === undefined) return;
    if (this.#slots.has(session.sessionId) || this.#sessions.get(session.sessionId) !== session) slot.release();
    else this.#slots.set(session.sessionId, slot);
  }

  async #create(hello: Hello, channel: WorkerChannel): Promise<LocalSession> {
    const ctx = this.#ctx;
    const opened = await ctx.store.openSession(
      this.#record(hello.workerId, hello.incarnation),
      leaseTtlSeconds(ctx.config),
    );
    return this.#adoptLocally(opened.sessionId, opened.leaseId, hello, opened.modRevision, channel, true);
  }

  #record(workerId: string, incarnation: string): SessionRecord {
    return {
      v: 1,
      workerId,
      incarnation,
      coordinatorId: this.#ctx.coordinatorId,
      ttlMs: this.#ctx.config.sessionTtlMs,
    };
  }

  async #resume(hello: Hello, sessionId: string, channel: WorkerChannel): Promise<ResumeResult> {
    const local = this.#sessions.get(sessionId);
    if (local !== undefined && !this.#table.isLive(sessionId)) return { ok: false, reason: 'deadline' };
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const verdict = resumeVerdict(await this.#ctx.store.session(sessionId), hello);
      if (!verdict.ok) return verdict;
      const { stored } = verdict;
      const res = await this.#ctx.store.adoptSession(stored, {
        ...stored.record,
        coordinatorId: this.#ctx.coordinatorId,
      });
      if (res.kind !== 'adopted') continue;
      const existing = this.#sessions.get(sessionId);
      if (existing !== undefined) {
        existing.modRevision = res.modRevision;
        if (!this.#table.heartbeat(sessionId).ok) return { ok: false, reason: 'deadline' };
        if (existing.channel !== undefined && existing.channel !== channel) {
          existing.channel.close(CLOSE_SESSION_MOVED, 'session resumed on another connection');
        }
        existing.channel = channel;
        // The old channel's requests may have been granted with their replies lost: read from now on.
        existing.requestsKnown = false;
        existing.capacity = hello.capacity;
        existing.queues = sessionQueues(hello.queues);
        this.#keepalive.add(existing.leaseId);
        return { ok: true, session: existing };
      }
      this.#ctx.log.info({ sessionId, workerId: hello.workerId }, 'session adopted');
      return {
        ok: true,
        session: this.#adoptLocally(sessionId, stored.leaseId, hello, res.modRevision, channel, false),
      };
    }
    return { ok: false, reason: 'unknown-session' };
  }

  #adoptLocally(
    sessionId: string,
    leaseId: string,
    hello: Hello,
    modRevision: bigint,
    channel: WorkerChannel,
    requestsKnown: boolean,
  ) {
    const session: LocalSession = {
      sessionId,
      leaseId,
      workerId: hello.workerId,
      incarnation: hello.incarnation,
      modRevision,
      channel,
      inflight: new Set(),
      wakers: new Set(),
      granted: new SessionGrants(),
      requestsKnown,
      unsureRequests: new Set(),
      capacity: hello.capacity,
      queues: sessionQueues(hello.queues),
      queueTurn: 0,
      acquiring: 0,
      carrying: 0,
      draining: false,
    };
    this.#sessions.set(sessionId, session);
    this.#table.open(sessionId);
    this.#keepalive.add(leaseId);
    this.#schedule();
    this.#ctx.metrics.sessions.set(this.#sessions.size);
    return session;
  }

  /** A peer rewrote sessions/<sid> (adoption) at `revision`: stop serving it, do not end it. */
  onPeerAdopted(sessionId: string, coordinatorId: string, revision: bigint): void {
    const session = this.#sessions.get(sessionId);
    if (session === undefined || coordinatorId === this.#ctx.coordinatorId || revision <= session.modRevision) return;
    this.#ctx.log.info({ sessionId, coordinatorId }, 'session moved to a peer');
    this.#forget(session);
    session.channel?.close(CLOSE_SESSION_MOVED, 'session moved to another coordinator');
  }

  #forget(session: LocalSession): void {
    if (this.#sessions.get(session.sessionId) !== session) return;
    this.#slots.get(session.sessionId)?.release();
    this.#slots.delete(session.sessionId);
    this.#keepalive.remove(session.leaseId);
    this.#table.remove(session.sessionId);
    this.#sessions.delete(session.sessionId);
    this.#ctx.metrics.sessions.set(this.#sessions.size);
  }

  #schedule(): void {
    if (this.#closed) return;
    const next = this.#table.nextDeadlineMs();
    if (next !== undefined) this.#deadlines.setBy(next);
  }

  #onTimer(): void {
    for (const sessionId of this.#table.takeDue()) {
      const session = this.#sessions.get(sessionId);
      if (session === undefined) continue;
      this.#keepalive.remove(session.leaseId);
      endAtDeadline(session, this.#endContext, {
        finished: (ended) => {
          this.#table.markEnded(ended.sessionId);
          this.#forget(ended);
        },
        record: (s) => this.#record(s.workerId, s.incarnation),
        ownersFreed: (freed) => {
          this.#onOwnersFreed(freed);
        },
      }).catch((err: unknown) => {
        this.#ctx.log.error({ err, sessionId }, 'session end failed');
      });
    }
    this.#schedule();
  }

  #onLeaseLost(leaseId: string): void {
    for (const session of this.#sessions.values()) {
      if (session.leaseId !== leaseId || !this.#table.beginEnding(session.sessionId)) continue;
      this.#ctx.log.warn({ sessionId: session.sessionId }, 'session lease gone in etcd');
      this.#ctx.metrics.expiries.inc({ reason: 'lost' });
      this.#forget(session);
      session.channel?.send({ type: 'session.expired', sessionId: session.sessionId, reason: 'revoked' });
    }
  }

  /**
   * etcd is unreachable: stop serving every session here without ending it (it stays in etcd for a
   * peer to adopt), close the sockets with 1001 so the workers resume elsewhere.
   */
  handOffAll(reason: string): void {
    for (const session of [...this.#sessions.values()]) {
      for (const wakeUp of [...session.wakers]) wakeUp();
      this.#forget(session);
      session.channel?.close(CLOSE_GOING_AWAY, reason);
    }
  }

  /** Shutdown: close sockets with "going away", stop keepalives; sessions stay in etcd for a peer. */
  close(): void {
    this.#closed = true;
    this.#deadlines.clear();
    this.#keepalive.close();
    for (const session of this.#sessions.values()) session.channel?.close(CLOSE_GOING_AWAY, 'coordinator going away');
  }
}
