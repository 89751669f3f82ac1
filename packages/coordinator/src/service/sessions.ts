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
import type { Hello } from '@leasehold/protocol';
import { SessionTable, type HeartbeatDecision } from '../core/session-table.js';
import { CLOSE_GOING_AWAY, CLOSE_SESSION_MOVED } from '../core/dispatch.js';
import { CoordinatorError } from '../errors.js';
import { KeepAliveStream } from '../etcd/keepalive.js';
import { sessionIdOf } from '../etcd/keys.js';
import { grantLease, revokeLease } from '../etcd/leases.js';
import {
  adoptSession,
  closeSession,
  createSession,
  endSession,
  MAX_END_SESSION_OWNERS,
  type HeldOwner,
} from '../etcd/transactions/session-txns.js';
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
}

export type ExpiredReason = 'deadline' | 'unknown-session' | 'incarnation-mismatch';

export interface OpenResult {
  readonly session: LocalSession;
  readonly resumed: boolean;
  /** Set when a resume was asked for but the old session could not be resumed. */
  readonly previous?: { readonly sessionId: string; readonly reason: ExpiredReason };
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class SessionManager {
  readonly #ctx: ServiceContext;
  readonly #table: SessionTable;
  readonly #sessions = new Map<string, LocalSession>();
  readonly #keepalive: KeepAliveStream;
  #timer: NodeJS.Timeout | undefined;
  #timerAtMs = Number.POSITIVE_INFINITY;
  #closed = false;
  #onOwnersFreed: () => void = () => undefined;

  constructor(ctx: ServiceContext) {
    this.#ctx = ctx;
    this.#table = new SessionTable(ctx.clock, ctx.config.sessionTtlMs);
    const leaseMs = leaseTtlSeconds(ctx.config.sessionTtlMs) * 1_000;
    this.#keepalive = new KeepAliveStream(ctx.etcd.leaseClient, {
      intervalMs: Math.max(50, Math.min(ctx.config.heartbeatIntervalMs, Math.floor(leaseMs / 3))),
      log: ctx.log.child({ component: 'keepalive' }),
      onLost: (leaseId) => {
        this.#onLeaseLost(leaseId);
      },
    });
  }

  start(): void {
    this.#keepalive.start();
  }

  /** Called when an ended session's owner keys were deleted (waiting acquires may now be granted). */
  onOwnersFreed(listener: () => void): void {
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
    let previous: OpenResult['previous'];
    if (hello.resumeSessionId !== undefined) {
      const resumed = await this.#resume(hello, hello.resumeSessionId, channel);
      if (resumed.ok) return { session: resumed.session, resumed: true };
      previous = { sessionId: hello.resumeSessionId, reason: resumed.reason };
    }
    const session = await this.#create(hello, channel);
    return { session, resumed: false, ...(previous === undefined ? {} : { previous }) };
  }

  async #create(hello: Hello, channel: WorkerChannel): Promise<LocalSession> {
    const ctx = this.#ctx;
    const leaseId = await grantLease(ctx.etcd, leaseTtlSeconds(ctx.config.sessionTtlMs));
    const sessionId = sessionIdOf(leaseId);
    const record = {
      v: 1 as const,
      workerId: hello.workerId,
      incarnation: hello.incarnation,
      coordinatorId: ctx.coordinatorId,
      ttlMs: ctx.config.sessionTtlMs,
    };
    const res = await createSession(ctx.kv, ctx.keys, { sessionId, leaseId, record });
    if (!res.ok) {
      await this.#revoke(leaseId);
      throw new CoordinatorError('INTERNAL', `session key for fresh lease ${sessionId} already exists`);
    }
    return this.#adoptLocally(sessionId, leaseId, hello, res.modRevision, channel);
  }

  async #resume(
    hello: Hello,
    sessionId: string,
    channel: WorkerChannel,
  ): Promise<{ ok: true; session: LocalSession } | { ok: false; reason: ExpiredReason }> {
    const local = this.#sessions.get(sessionId);
    if (local !== undefined && !this.#table.isLive(sessionId)) return { ok: false, reason: 'deadline' };
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const stored = await this.#ctx.reads.session(sessionId);
      if (stored === undefined || stored.record.workerId !== hello.workerId) {
        return { ok: false, reason: 'unknown-session' };
      }
      if (stored.record.incarnation !== hello.incarnation) return { ok: false, reason: 'incarnation-mismatch' };
      if (stored.record.ending === true) return { ok: false, reason: 'deadline' };
      const res = await adoptSession(this.#ctx.kv, this.#ctx.keys, {
        sessionId,
        leaseId: stored.leaseId,
        seenModRevision: stored.modRevision,
        record: { ...stored.record, coordinatorId: this.#ctx.coordinatorId },
      });
      if (!res.ok) continue;
      const existing = this.#sessions.get(sessionId);
      if (existing !== undefined) {
        existing.modRevision = res.modRevision;
        if (!this.#table.heartbeat(sessionId).ok) return { ok: false, reason: 'deadline' };
        if (existing.channel !== undefined && existing.channel !== channel) {
          existing.channel.close(CLOSE_SESSION_MOVED, 'session resumed on another connection');
        }
        existing.channel = channel;
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
    this.#keepalive.remove(session.leaseId);
    this.#table.remove(session.sessionId);
    this.#sessions.delete(session.sessionId);
    this.#ctx.metrics.sessions.set(this.#sessions.size);
  }

  #schedule(): void {
    if (this.#closed) return;
    const next = this.#table.nextDeadlineMs();
    if (next === undefined || (this.#timer !== undefined && this.#timerAtMs <= next)) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timerAtMs = next;
    this.#timer = setTimeout(
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
   * The deadline passed: end the session in etcd (if still ours), tell the worker, revoke its lease.
   * The first attempt takes the session's owner keys from the watch-fed index, without a read: the
   * txn compares each owner's create_revision and that no holding is newer than the index, so a
   * lagging index only fails it, and the next attempts read the holdings from etcd. A session
   * holding more than one txn can delete ({@link MAX_END_SESSION_OWNERS}) is marked ending by
   * `closeSession` instead, and the lease revoke deletes its keys.
   */
  async #end(session: LocalSession): Promise<void> {
    const { sessionId } = session;
    const log = this.#ctx.log.child({ sessionId, workerId: session.workerId });
    this.#keepalive.remove(session.leaseId);
    for (const wakeUp of [...session.wakers]) wakeUp();
    if (session.inflight.size > 0) {
      await Promise.race([Promise.allSettled([...session.inflight]), delay(this.#ctx.config.sink.timeoutMs + 500)]);
    }
    const giveUpAt = this.#ctx.clock.nowMs() + 2_000 * leaseTtlSeconds(this.#ctx.config.sessionTtlMs);
    let outcome: 'ended' | 'moved' | 'gone' = 'gone';
    let held: HeldOwner[] = [];
    let fromIndex = true;
    for (let attempt = 0; ; attempt += 1) {
      try {
        let holdings: HeldOwner[];
        let knownUpTo: bigint | undefined;
        if (fromIndex) {
          knownUpTo = this.#ctx.index.revision;
          holdings = this.#ctx.index.ownersOf(sessionId).map((o) => ({ resource: o.resource, token: o.token }));
        } else {
          const read = await this.#ctx.reads.sessionHoldings(sessionId);
          if (read.session === undefined) break;
          if (read.session.modRevision !== session.modRevision) {
            outcome = 'moved';
            break;
          }
          holdings = read.held;
        }
        if (holdings.length > MAX_END_SESSION_OWNERS) {
          // Too many owner keys for one txn: mark the session ending (only if still ours), then
          // the lease revoke below deletes every key on it at one revision. The watch frees them.
          const closed = await closeSession(this.#ctx.kv, this.#ctx.keys, {
            sessionId,
            leaseId: session.leaseId,
            knownModRevision: session.modRevision,
            record: {
              v: 1,
              workerId: session.workerId,
              incarnation: session.incarnation,
              coordinatorId: this.#ctx.coordinatorId,
              ttlMs: this.#ctx.config.sessionTtlMs,
            },
          });
          if (closed.ok) {
            outcome = 'ended';
            held = holdings;
            log.info({ held: held.length }, 'session expired (closed; the lease revoke deletes its keys)');
            break;
          }
          if (closed.current === undefined) break;
          if (BigInt(closed.current.mod_revision) !== session.modRevision) {
            outcome = 'moved';
          }
          break;
        }
        const res = await endSession(this.#ctx.kv, this.#ctx.keys, {
          sessionId,
          knownModRevision: session.modRevision,
          held: holdings,
          ...(knownUpTo === undefined ? {} : { knownUpTo }),
        });
        if (res.ok) {
          outcome = 'ended';
          held = holdings;
          log.info({ revision: res.revision.toString(), held: held.length }, 'session expired');
          this.#freeInIndex(held, res.revision);
          break;
        }
        if (fromIndex) {
          fromIndex = false;
          if (res.current === undefined) break;
          if (BigInt(res.current.mod_revision) !== session.modRevision) {
            outcome = 'moved';
            break;
          }
        }
      } catch (err) {
        fromIndex = false;
        if (this.#ctx.clock.nowMs() > giveUpAt) {
          log.warn({ err }, 'could not end session in etcd, leaving it to the lease backstop');
          break;
        }
        log.warn({ err }, 'ending session failed, retrying');
        await delay(Math.min(500, 25 * 2 ** Math.min(attempt, 5)));
      }
    }
    this.#table.markEnded(sessionId);
    this.#forget(session);
    const channel = session.channel;
    if (outcome === 'moved') {
      log.info('session was adopted by a peer before its deadline here');
      channel?.close(CLOSE_SESSION_MOVED, 'session moved to another coordinator');
      return;
    }
    this.#ctx.metrics.expiries.inc({ reason: 'deadline' });
    // Told first (its owner keys are gone from etcd already, or the session key was): the revoke
    // only drops what is left on the lease and does not change what the worker may do.
    for (const h of held) {
      channel?.send({
        type: 'lease.revoked',
        resource: h.resource,
        token: h.token.toString(),
        reason: 'session-expired',
      });
    }
    channel?.send({ type: 'session.expired', sessionId, reason: 'deadline' });
    await this.#revoke(session.leaseId);
  }

  /**
   * The owner keys are gone in etcd (the end txn succeeded): drop them from the index now instead of
   * waiting for the watch to say so, and wake waiting acquires. The index is a hint (a grant txn
   * compares the owner key's absence), and the watch's own delete of the same key is a no-op.
   */
  #freeInIndex(held: readonly HeldOwner[], revision: bigint): void {
    if (held.length === 0) return;
    const { index } = this.#ctx;
    for (const h of held) index.freeOwner(h.resource, h.token, revision);
    this.#onOwnersFreed();
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
      await revokeLease(this.#ctx.etcd, leaseId);
    } catch (err) {
      this.#ctx.log.warn({ err }, 'lease revoke failed; the lease TTL will end it');
    }
  }

  /** Shutdown: close sockets with "going away", stop keepalives; sessions stay in etcd for a peer. */
  close(): void {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#keepalive.close();
    for (const session of this.#sessions.values()) session.channel?.close(CLOSE_GOING_AWAY, 'coordinator going away');
  }
}
