/**
 * Renew, complete and release of a held lease. Refusals are data (`error` frames with NOT_HOLDER /
 * LEASE_EXPIRED), decided against etcd (the owner key) and the session deadline — never against a
 * clock alone, and never reviving an expired session.
 */
import { parseToken, type Complete, type CoordinatorMessage, type Release, type Renew } from '@leasehold/protocol';
import { errorFrame, failureReply } from '../core/replies.js';
import type { CompleteJob, HolderProof, LeaseOutcome, StoredOwner } from '../store/port.js';
import { MicroBatcher } from './batcher.js';
import type { ServiceContext } from './context.js';
import type { LocalSession, SessionManager } from './sessions.js';

function holds(owner: StoredOwner | undefined, session: LocalSession, token: bigint): owner is StoredOwner {
  return owner !== undefined && owner.token === token && owner.record.sessionId === session.sessionId;
}

/** The grant `token` on `resource` has ended (released or completed here). */
function forgetGrant(session: LocalSession, resource: string, token: bigint): void {
  if (session.granted.get(resource)?.token === token) session.granted.delete(resource);
}

/** Releases / completions per store call (the store splits them to fit its own limits). */
const BATCH_MAX = 25;

export class LeaseService {
  readonly #ctx: ServiceContext;
  readonly #sessions: SessionManager;
  /** Releases of one event-loop turn go to etcd as one txn (one per lease when a compare fails). */
  readonly #releases: MicroBatcher<HolderProof, LeaseOutcome>;
  /** Completions of one turn whose holder and task the index already shows: one txn. */
  readonly #completes: MicroBatcher<CompleteJob, LeaseOutcome>;

  constructor(ctx: ServiceContext, sessions: SessionManager) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    this.#releases = new MicroBatcher((proofs) => ctx.store.release(proofs), BATCH_MAX);
    this.#completes = new MicroBatcher((jobs) => ctx.store.complete(jobs), BATCH_MAX);
  }

  /** Never rejects. */
  renew(session: LocalSession, msg: Renew, receivedAtMs: number): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      const refuse = (code: 'NOT_HOLDER' | 'LEASE_EXPIRED', message: string) => {
        this.#ctx.metrics.renewRefusals.inc({ reason: code });
        return errorFrame(code, message, msg.id);
      };
      if (msg.incarnation !== session.incarnation)
        return refuse('NOT_HOLDER', 'incarnation does not match the session');
      if (!this.#sessions.isLive(session)) return refuse('LEASE_EXPIRED', 'the session deadline has passed');
      const token = parseToken(msg.token);
      const owner = await this.#ctx.store.owner(msg.resource);
      if (!holds(owner, session, token)) return refuse('NOT_HOLDER', 'this session does not hold that token');
      const beat = this.#sessions.heartbeat(session, receivedAtMs);
      if (!beat.ok) return refuse('LEASE_EXPIRED', 'the session deadline has passed');
      return {
        type: 'lease.renewed',
        inReplyTo: msg.id,
        resource: msg.resource,
        token: msg.token,
        ttlMs: Math.max(1, Math.floor(beat.ttlMs)),
      };
    });
  }

  /** Never rejects. A retry after a lost reply is answered as a replay. */
  complete(session: LocalSession, msg: Complete): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      const token = parseToken(msg.token);
      const done: CoordinatorMessage = {
        type: 'task.completed',
        inReplyTo: msg.id,
        taskId: msg.taskId,
        resource: msg.resource,
        token: msg.token,
      };
      if (msg.incarnation !== session.incarnation) {
        return errorFrame('NOT_HOLDER', 'incarnation does not match the session', msg.id);
      }
      // Fast path: the watch-fed index shows this session holding this token for this task, so the
      // batched txn is tried without a read; its compares (holder proof, task unchanged) decide,
      // and any failure falls through to the read below (which also answers replays).
      const hint = this.#ctx.index.pendingTask(msg.taskId);
      const held = this.#ctx.index.ownerOf(msg.resource);
      if (
        hint !== undefined &&
        hint.resource === msg.resource &&
        held?.token === token &&
        held.sessionId === session.sessionId &&
        held.taskId === msg.taskId &&
        this.#sessions.isLive(session)
      ) {
        const fast = await this.#completes.submit({
          sessionId: session.sessionId,
          leaseId: session.leaseId,
          resource: msg.resource,
          token,
          requestId: held.requestId,
          task: hint.record,
          taskModRevision: hint.modRevision,
          resultId: msg.resultId,
        });
        if (fast.kind === 'done') {
          forgetGrant(session, msg.resource, token);
          if (this.#ctx.log.isLevelEnabled('debug')) {
            this.#ctx.log.debug(
              { sessionId: session.sessionId, resource: msg.resource, token: msg.token },
              'task completed',
            );
          }
          return done;
        }
      }
      const { owner, task } = await this.#ctx.store.ownerAndTask(msg.resource, msg.taskId);
      const result = task?.record.result;
      if (task?.record.state === 'completed' && result?.token === msg.token && result.resultId === msg.resultId) {
        return done;
      }
      if (!this.#sessions.isLive(session))
        return errorFrame('LEASE_EXPIRED', 'the session deadline has passed', msg.id);
      if (!holds(owner, session, token) || owner.record.taskId !== msg.taskId || task === undefined) {
        return errorFrame('NOT_HOLDER', 'this session does not hold that task and token', msg.id);
      }
      const [settled] = await this.#ctx.store.complete([
        {
          sessionId: session.sessionId,
          leaseId: session.leaseId,
          resource: msg.resource,
          token,
          requestId: owner.record.requestId,
          task: task.record,
          taskModRevision: task.modRevision,
          resultId: msg.resultId,
        },
      ]);
      if (settled === undefined) throw new Error('store.complete returned no outcome');
      if (!settled.ok) throw settled.error;
      if (settled.value.kind !== 'done') {
        return errorFrame('NOT_HOLDER', 'the lease changed before completion was recorded', msg.id);
      }
      forgetGrant(session, msg.resource, token);
      this.#ctx.log.info({ sessionId: session.sessionId, resource: msg.resource, token: msg.token }, 'task completed');
      return done;
    });
  }

  /** Never rejects. */
  release(session: LocalSession, msg: Release): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      if (msg.incarnation !== session.incarnation) {
        return errorFrame('NOT_HOLDER', 'incarnation does not match the session', msg.id);
      }
      if (!this.#sessions.isLive(session))
        return errorFrame('LEASE_EXPIRED', 'the session deadline has passed', msg.id);
      const token = parseToken(msg.token);
      const notHolder = () => errorFrame('NOT_HOLDER', 'this session does not hold that token', msg.id);
      const requestId = await this.#heldRequestId(session, msg.resource, token);
      if (requestId === undefined) return notHolder();
      const res = await this.#releases.submit({
        sessionId: session.sessionId,
        leaseId: session.leaseId,
        resource: msg.resource,
        token,
        requestId,
      });
      if (res.kind !== 'done') return notHolder();
      forgetGrant(session, msg.resource, token);
      return { type: 'lease.released', inReplyTo: msg.id, resource: msg.resource, token: msg.token };
    });
  }

  /**
   * The request id of `session`'s grant `token` on `resource` (it names the grant's holding key):
   * from the grants sent to the session, else the watch-fed index, else read from the owner key;
   * undefined when the session does not hold that token. Only a hint: the release txn compares the
   * owner and holding keys.
   */
  async #heldRequestId(session: LocalSession, resource: string, token: bigint): Promise<string | undefined> {
    const sent = session.granted.get(resource);
    if (sent?.token === token) return sent.requestId;
    const hint = this.#ctx.index.ownerOf(resource);
    if (hint?.token === token && hint.sessionId === session.sessionId) return hint.requestId;
    const owner = await this.#ctx.store.owner(resource);
    return holds(owner, session, token) ? owner.record.requestId : undefined;
  }

  #guard(session: LocalSession, id: string, run: () => Promise<CoordinatorMessage>): Promise<CoordinatorMessage> {
    return this.#sessions.track(
      session,
      run().catch((err: unknown) => failureReply(err, id)),
    );
  }
}
