/**
 * Sessions served by this coordinator: open (one etcd lease each), resume/adopt, heartbeats,
 * keepalive, and the end of a session at its deadline.
 *
 * Expiry is judged here, by the injected monotonic clock ({@link SessionTable}). At the deadline
 * this coordinator — only if it still serves the session (its txn compares the session key's
 * mod_revision) — deletes every owner key of the session at one revision and revokes the lease.
 * The etcd lease (TTL a bit longer than the session TTL, kept alive over one stream) is only the
 * backstop when this coordinator dies.
 */
import { formatToken, RepeatGate, type Hello } from '@leasehold/protocol';
import { CLOSE_GOING_AWAY, CLOSE_SESSION_MOVED } from '../core/dispatch.js';
import type { SessionRecord } from '../core/records.js';
import { SessionEndPlan, type EndAction, type EndObservation } from '../core/session-end.js';
import { SlotsByKey, type Slot } from '../core/slots.js';
import { SessionTable, type HeartbeatDecision } from '../core/session-table.js';
import type { OwnerEntry } from '../core/task-index.js';
import type { TimerHandle } from '../core/timers.js';
import { CoordinatorError } from '../errors.js';
import type { HeldOwner, SessionLeaseKeeper } from '../store/port.js';
import type { WorkerChannel } from './channel.js';
import { leaseTtlSeconds, type ServiceContext } from './context.js';

export interface LocalSession {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly workerId: string;
  readonly incarnation: string;
  /** mod_revision of sessions/<sid> as this coordinator wrote it: proof that it serves the session. */
  modRevision: bigint;
  channel: WorkerChannel | undefined;
  readonly inflight: Set<Promise<unknown>>;
  /** Waiting long-poll acquires of this session: woken when the session ends. */
  readonly wakers: Set<() => void>;
  /**
   * Grants sent to this session's worker and not yet released or completed here: resource ->
   * token and request id (which names the grant's holding key). A hint for release / complete,
   * which compare both keys in etcd; the watch-fed index and a read back it up.
   */
  readonly granted: Map<string, { readonly token: bigint; readonly requestId: string }>;
  /** Grants in flight allowed at once (the hello's `capacity`): held grants plus acquires being served. */
  capacity: number;
  /** Acquires being served now (long polls included). */
  acquiring: number;
}

export type ExpiredReason = 'deadline' | 'unknown-session' | 'incarnation-mismatch';

type ResumeResult = { ok: true; session: LocalSession } | { ok: false; reason: ExpiredReason };

export interface OpenResult {
  readonly session: LocalSession;
  readonly resumed: boolean;
  /** Set when a resume was asked for but the old session could not be resumed. */
  readonly previous?: { readonly sessionId: string; readonly reason: ExpiredReason };
}

export class SessionManager {
  readonly #ctx: ServiceContext;
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
  #timer: TimerHandle | undefined;
  #timerAtMs = Number.POSITIVE_INFINITY;
  #closed = false;
  #onOwnersFreed: (freed: readonly OwnerEntry[]) => void = () => undefined;
  readonly #repeats = new RepeatGate();

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
    this.#table = new SessionTable(ctx.clock, ctx.config.sessionTtlMs);
    this.#perWorker = new SlotsByKey(ctx.config.maxSessionsPerWorker);
    const leaseMs = leaseTtlSeconds(ctx.config) * 1_000;
    this.#keepalive = ctx.store.leaseKeeper({
      intervalMs: Math.max(50, Math.min(ctx.config.heartbeatIntervalMs, Math.floor(leaseMs / 3))),
      onLost: (leaseId) => {
        this.#onLeaseLost(leaseId);
      },
    });
  }

  start(): void {
    this.#keepalive.start();
  }

  /** Called when an ended session's owner keys were deleted (waiting acquires may now be granted). */
  onOwnersFreed(listener: (freed: readonly OwnerEntry[]) => void): void {
    this.#onOwnersFreed = listener;
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
    return this.#adoptLocally(opened.sessionId, opened.leaseId, hello, opened.modRevision, channel);
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
      const stored = await this.#ctx.store.session(sessionId);
      if (stored === undefined || stored.record.workerId !== hello.workerId) {
        return { ok: false, reason: 'unknown-session' };
      }
      if (stored.record.incarnation !== hello.incarnation) return { ok: false, reason: 'incarnation-mismatch' };
      if (stored.record.ending === true) return { ok: false, reason: 'deadline' };
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
        existing.capacity = hello.capacity;
        this.#keepalive.add(existing.leaseId);
        return { ok: true, session: existing };
      }
      this.#ctx.log.info({ sessionId, workerId: hello.workerId }, 'session adopted');
      return { ok: true, session: this.#adoptLocally(sessionId, stored.leaseId, hello, res.modRevision, channel) };
    }
    return { ok: false, reason: 'unknown-session' };
  }

  #adoptLocally(sessionId: string, leaseId: string, hello: Hello, modRevision: bigint, channel: WorkerChannel) {
    const session: LocalSession = {
      sessionId,
      leaseId,
      workerId: hello.workerId,
      incarnation: hello.incarnation,
      modRevision,
      channel,
      inflight: new Set(),
      wakers: new Set(),
      granted: new Map(),
      capacity: hello.capacity,
      acquiring: 0,
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
    if (next === undefined || (this.#timer !== undefined && this.#timerAtMs <= next)) return;
    this.#ctx.timers.clearTimeout(this.#timer);
    this.#timerAtMs = next;
    this.#timer = this.#ctx.timers.setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerAtMs = Number.POSITIVE_INFINITY;
        this.#onTimer();
      },
      Math.max(0, Math.ceil(next - this.#ctx.clock.nowMs())),
    );
  }

  #onTimer(): void {
    for (const sessionId of this.#table.takeDue()) {
      const session = this.#sessions.get(sessionId);
      if (session === undefined) continue;
      this.#end(session).catch((err: unknown) => {
        this.#ctx.log.error({ err, sessionId }, 'session end failed');
      });
    }
    this.#schedule();
  }

  /**
   * The deadline passed: end the session in the store (if still ours), tell the worker, revoke its
   * lease. The steps are decided by the pure {@link SessionEndPlan}; this shell performs them.
   */
  async #end(session: LocalSession): Promise<void> {
    const { sessionId } = session;
    const ctx = this.#ctx;
    const log = ctx.log.child({ sessionId, workerId: session.workerId });
    this.#keepalive.remove(session.leaseId);
    for (const wakeUp of [...session.wakers]) wakeUp();
    if (session.inflight.size > 0) {
      await Promise.race([Promise.allSettled([...session.inflight]), this.#delay(ctx.config.sink.timeoutMs + 500)]);
    }
    const plan = new SessionEndPlan({
      maxOwnersPerTxn: ctx.store.limits.maxEndSessionOwners,
      giveUpAtMs: ctx.clock.nowMs() + 2_000 * leaseTtlSeconds(ctx.config),
    });
    let action: EndAction = plan.first();
    for (;;) {
      if (action.kind === 'finish') break;
      let seen: EndObservation | { kind: 'next'; action: EndAction };
      try {
        seen = await this.#perform(session, plan, action);
      } catch (err) {
        const gate = this.#repeats.note(`end ${sessionId}`, ctx.clock.nowMs());
        if (gate.log) log.warn({ err, repeated: gate.suppressed }, 'ending session failed, retrying');
        seen = { kind: 'error', nowMs: ctx.clock.nowMs() };
      }
      action = seen.kind === 'next' ? seen.action : plan.next(seen);
    }
    this.#repeats.clear(`end ${sessionId}`);
    this.#table.markEnded(sessionId);
    this.#forget(session);
    const channel = session.channel;
    if (action.result === 'moved') {
      log.info('session was adopted by a peer before its deadline here');
      channel?.close(CLOSE_SESSION_MOVED, 'session moved to another coordinator');
      return;
    }
    const { held } = action;
    if (action.result === 'ended') log.info({ held: held.length }, 'session expired');
    else log.warn('could not end session in the store, leaving it to the lease backstop');
    if (action.revision !== undefined) this.#freeInIndex(held, action.revision);
    ctx.metrics.expiries.inc({ reason: 'deadline' });
    // Told first (its owner keys are gone from the store already, or the session key was): the
    // revoke only drops what is left on the lease and does not change what the worker may do.
    for (const h of held) {
      channel?.send({
        type: 'lease.revoked',
        resource: h.resource,
        token: formatToken(h.token),
        reason: 'session-expired',
      });
    }
    channel?.send({ type: 'session.expired', sessionId, reason: 'deadline' });
    if (action.revoke) await this.#revoke(session.leaseId);
  }

  /** One step of the end plan against the store; what was seen (or the plan's next action). */
  async #perform(
    session: LocalSession,
    plan: SessionEndPlan,
    action: Exclude<EndAction, { kind: 'finish' }>,
  ): Promise<EndObservation | { kind: 'next'; action: EndAction }> {
    const { store, index } = this.#ctx;
    switch (action.kind) {
      case 'endFromIndex': {
        const held = index.ownersOf(session.sessionId).map((o) => ({ resource: o.resource, token: o.token }));
        return { kind: 'next', action: plan.fromIndex(held, index.revision) };
      }
      case 'readHoldings': {
        const read = await store.sessionHoldings(session.sessionId);
        const state =
          read.session === undefined ? 'gone' : read.session.modRevision === session.modRevision ? 'ours' : 'moved';
        return { kind: 'holdings', session: state, held: read.held };
      }
      case 'end': {
        const outcome = await store.endSession({
          sessionId: session.sessionId,
          knownModRevision: session.modRevision,
          held: action.held,
          ...(action.knownUpTo === undefined ? {} : { knownUpTo: action.knownUpTo }),
        });
        return { kind: 'ended', held: action.held, outcome };
      }
      case 'close': {
        // Too many owner keys for one txn: mark the session ending (only if still ours); the lease
        // revoke deletes every key on it at one revision, and the watch frees them.
        const outcome = await store.closeSession({
          sessionId: session.sessionId,
          leaseId: session.leaseId,
          knownModRevision: session.modRevision,
          record: this.#record(session.workerId, session.incarnation),
        });
        return { kind: 'closed', held: action.held, outcome };
      }
      case 'wait':
        await this.#delay(action.ms);
        return { kind: 'waited' };
    }
  }

  #delay(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      this.#ctx.timers.setTimeout(resolve, ms);
    });
  }

  /**
   * The owner keys are gone in etcd (the end txn succeeded): drop them from the index now instead of
   * waiting for the watch to say so, and wake waiting acquires. The index is a hint (a grant txn
   * compares the owner key's absence), and the watch's own delete of the same key is a no-op.
   */
  #freeInIndex(held: readonly HeldOwner[], revision: bigint): void {
    if (held.length === 0) return;
    const { index } = this.#ctx;
    const freed: OwnerEntry[] = [];
    for (const h of held) {
      const entry = index.freeOwner(h.resource, h.token, revision);
      if (entry !== undefined) freed.push(entry);
    }
    this.#onOwnersFreed(freed);
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

  async #revoke(leaseId: string): Promise<void> {
    try {
      await this.#ctx.store.revokeLease(leaseId);
    } catch (err) {
      this.#ctx.log.warn({ err }, 'lease revoke failed; the lease TTL will end it');
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
    this.#ctx.timers.clearTimeout(this.#timer);
    this.#keepalive.close();
    for (const session of this.#sessions.values()) session.channel?.close(CLOSE_GOING_AWAY, 'coordinator going away');
  }
}
