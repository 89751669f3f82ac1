/**
 * Renew, complete, fail and release of a held lease. Refusals are data (`error` frames with
 * NOT_HOLDER / LEASE_EXPIRED), decided against etcd (the owner key) and the session deadline —
 * never against a clock alone, and never reviving an expired session.
 *
 * Complete, fail and release end the attempt: one txn deletes the owner key and writes the task
 * record the lifecycle computes (completed; failed, or pending after a backoff; pending again).
 */
import type { Span } from '@opentelemetry/api';
import {
  parseToken,
  type Complete,
  type CoordinatorMessage,
  type Fail,
  type Release,
  type Renew,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import { attemptFailed, completed, endedBy, policyOf, released } from '../core/lifecycle.js';
import type { TaskRecord } from '../core/records.js';
import { errorFrame, failureReply } from '../core/replies.js';
import { recordOf, traceparentOf, type TaskIndex } from '../core/task-index.js';
import type { LegacyParts } from '../core/task-record.js';
import type { Metrics } from '../metrics.js';
import type {
  FinishJob,
  GrantJob,
  GrantOutcome,
  LeaseOutcome,
  LeaseStore,
  StoredOwner,
  StoredTask,
} from '../store/port.js';
import { MicroBatcher } from '@leasehold/sink-client';
import { lifecycleEnv, type LifecycleContext } from './context.js';
import type { LocalSession, SessionRegistry } from './local-session.js';
import type { SessionManager } from './sessions.js';
import { Attr, contextOf, endWithReply, tracer } from './tracing.js';

/** What the lease service uses. */
export interface LeasesContext extends LifecycleContext {
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'renewRefusals' | 'taskAttempts' | 'taskFailures' | 'batchItems'>;
  readonly store: Pick<LeaseStore, 'owner' | 'ownerAndTask' | 'task' | 'finish'>;
  readonly index: Pick<TaskIndex, 'pendingTask' | 'ownerOf'>;
}

/** What renewing asks of the session registry besides the registry view: the heartbeat. */
export type LeaseSessions = SessionRegistry & Pick<SessionManager, 'heartbeat'>;

function holds(owner: StoredOwner | undefined, session: LocalSession, token: bigint): owner is StoredOwner {
  return owner !== undefined && owner.token === token && owner.record.sessionId === session.sessionId;
}

/** The grant `token` on `resource` has ended (released or completed here). */
function forgetGrant(session: LocalSession, resource: string, token: bigint): void {
  if (session.granted.get(resource)?.token === token) session.granted.delete(resource);
}

/** The txn input that ends `held` (complete, fail, release) with the task record `next`. */
function finishJob(
  session: LocalSession,
  resource: string,
  token: bigint,
  held: { readonly requestId: string; readonly task: HeldTask },
  next: TaskRecord,
): FinishJob {
  return {
    sessionId: session.sessionId,
    leaseId: session.leaseId,
    resource,
    token,
    requestId: held.requestId,
    taskModRevision: held.task.modRevision,
    next,
    legacy: held.task.legacy,
  };
}

/**
 * A grant that may ride in a completion's own finish txn (a carried acquire, carried-acquire.ts).
 * The lease service fills in what came of it.
 */
export interface CompletionRide {
  /**
   * Called on the completion's fast path (no read), in the turn its txn is queued: the grant job to
   * carry in it, or undefined.
   */
  readonly board: (completing: { readonly resource: string; readonly token: bigint }) => GrantJob | undefined;
  /** Once a txn carried the job: its grant's outcome (absent: the grant was not tried). */
  outcome?: GrantOutcome | undefined;
  /** That txn failed unanswered: the finish and the grant may have been applied. */
  unsure?: boolean;
}

/** Attempt ends per store call (the store splits them to fit its own limits). */
const BATCH_MAX = 25;

/** The task record (and its mod_revision) an attempt end is computed from. */
interface HeldTask {
  readonly record: TaskRecord;
  readonly modRevision: bigint;
  /** A record of layout v1: the end moves its payload and history out. */
  readonly legacy?: LegacyParts | undefined;
}

export class LeaseService {
  readonly #ctx: LeasesContext;
  readonly #sessions: LeaseSessions;
  /** Attempt ends (complete, fail, release) of one event-loop turn go to etcd as one txn (one per lease when a compare fails). */
  readonly #finishes: MicroBatcher<FinishJob, LeaseOutcome>;

  constructor(ctx: LeasesContext, sessions: LeaseSessions) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    const observe = (n: number): void => {
      ctx.metrics.batchItems.observe({ kind: 'finish' }, n);
    };
    this.#finishes = new MicroBatcher((jobs) => ctx.store.finish(jobs), BATCH_MAX, { observe });
  }

  /** Never rejects. */
  renew(session: LocalSession, msg: Renew, receivedAtMs: number): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      const refuse = (code: 'NOT_HOLDER' | 'LEASE_EXPIRED', message: string) => {
        this.#ctx.metrics.renewRefusals.inc({ reason: code.toLowerCase() });
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

  /**
   * Never rejects. A retry after a lost reply is answered as a replay. With `ride`, a grant may be
   * made in the completion's own txn (see {@link CompletionRide}).
   */
  complete(session: LocalSession, msg: Complete, ride?: CompletionRide): Promise<CoordinatorMessage> {
    return this.#traced('leasehold.task.complete', session, msg, msg.taskId, () => this.#complete(session, msg, ride));
  }

  #complete(session: LocalSession, msg: Complete, ride: CompletionRide | undefined): Promise<CoordinatorMessage> {
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
      // Fast path: the watch-fed index (or, before the watch has shown it, the grant this
      // coordinator made) shows this session holding this token for this task, so the batched txn
      // is tried without a read; its compares (holder proof, task unchanged) decide, and any
      // failure falls through to the read below (which also answers replays).
      const known = this.#knownHeld(session, msg.resource, token);
      if (known !== undefined && known.task.record.taskId === msg.taskId && this.#sessions.isLive(session)) {
        const hintRecord = known.task.record;
        const next = completed(hintRecord, token, msg.resultId, this.#ctx.wallClock(), msg.noResult === true);
        // The carried grant is nested under this finish's compares: made only if the finish is.
        const carried = ride?.board({ resource: msg.resource, token });
        let fast: LeaseOutcome;
        try {
          fast = await this.#finishes.submit({
            sessionId: session.sessionId,
            leaseId: session.leaseId,
            resource: msg.resource,
            token,
            requestId: known.requestId,
            taskModRevision: known.task.modRevision,
            next,
            ...(carried === undefined ? {} : { carried }),
          });
        } catch (err) {
          if (ride !== undefined && carried !== undefined) ride.unsure = true;
          throw err;
        }
        if (ride !== undefined && carried !== undefined && fast.kind === 'done') ride.outcome = fast.carried;
        if (fast.kind === 'done') {
          this.#observeEnd(hintRecord, 'completed');
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
      // A replay (the reply was lost) only for the session that completed it: to anyone else the
      // outcome is none of their business, and they are not the holder.
      const result = task?.record.result;
      if (
        task?.record.state === 'completed' &&
        result?.token === msg.token &&
        result.resultId === msg.resultId &&
        endedBy(task.record, msg.token, 'completed', session)
      ) {
        return done;
      }
      if (!this.#sessions.isLive(session))
        return errorFrame('LEASE_EXPIRED', 'the session deadline has passed', msg.id);
      if (!holds(owner, session, token) || owner.record.taskId !== msg.taskId || task === undefined) {
        return errorFrame('NOT_HOLDER', 'this session does not hold that task and token', msg.id);
      }
      const next = completed(task.record, token, msg.resultId, this.#ctx.wallClock(), msg.noResult === true);
      const res = await this.#finishOne(
        finishJob(session, msg.resource, token, { requestId: owner.record.requestId, task }, next),
      );
      if (res.kind !== 'done') {
        return errorFrame('NOT_HOLDER', 'the lease changed before completion was recorded', msg.id);
      }
      this.#observeEnd(task.record, 'completed');
      forgetGrant(session, msg.resource, token);
      this.#ctx.log.info({ sessionId: session.sessionId, resource: msg.resource, token: msg.token }, 'task completed');
      return done;
    });
  }

  /** Never rejects. */
  release(session: LocalSession, msg: Release): Promise<CoordinatorMessage> {
    const taskId = this.#ctx.index.ownerOf(msg.resource)?.taskId;
    return this.#traced('leasehold.lease.release', session, msg, taskId, () => this.#release(session, msg));
  }

  #release(session: LocalSession, msg: Release): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      if (msg.incarnation !== session.incarnation) {
        return errorFrame('NOT_HOLDER', 'incarnation does not match the session', msg.id);
      }
      if (!this.#sessions.isLive(session))
        return errorFrame('LEASE_EXPIRED', 'the session deadline has passed', msg.id);
      const token = parseToken(msg.token);
      const notHolder = () => errorFrame('NOT_HOLDER', 'this session does not hold that token', msg.id);
      const held = await this.#heldTask(session, msg.resource, token);
      if (held === undefined) return notHolder();
      const res = await this.#finishes.submit(
        finishJob(session, msg.resource, token, held, released(held.task.record, token, this.#ctx.wallClock())),
      );
      if (res.kind !== 'done') return notHolder();
      forgetGrant(session, msg.resource, token);
      return { type: 'lease.released', inReplyTo: msg.id, resource: msg.resource, token: msg.token };
    });
  }

  /**
   * Never rejects. The handler failed: the attempt ends as the task's retry policy says (pending
   * after a backoff, or failed). A retry after a lost reply is answered from the task's history.
   */
  fail(session: LocalSession, msg: Fail): Promise<CoordinatorMessage> {
    return this.#traced('leasehold.task.fail', session, msg, msg.taskId, async (span) => {
      // The handler's error, as the worker reported it.
      span.addEvent('exception', {
        'exception.type': msg.error.name,
        'exception.message': msg.error.message,
        'leasehold.retryable': msg.error.retryable,
      });
      const reply = await this.#fail(session, msg);
      if (reply.type === 'task.failed') span.setAttribute(Attr.OUTCOME, reply.outcome);
      return reply;
    });
  }

  #fail(session: LocalSession, msg: Fail): Promise<CoordinatorMessage> {
    return this.#guard(session, msg.id, async () => {
      if (msg.incarnation !== session.incarnation) {
        return errorFrame('NOT_HOLDER', 'incarnation does not match the session', msg.id);
      }
      const token = parseToken(msg.token);
      const held = await this.#heldTask(session, msg.resource, token);
      if (held === undefined || held.task.record.taskId !== msg.taskId) {
        const replay = await this.#failReplay(session, msg);
        return replay ?? errorFrame('NOT_HOLDER', 'this session does not hold that task and token', msg.id);
      }
      if (!this.#sessions.isLive(session)) {
        return errorFrame('LEASE_EXPIRED', 'the session deadline has passed', msg.id);
      }
      const next = attemptFailed(held.task.record, token, msg.error, 'failed', lifecycleEnv(this.#ctx));
      const res = await this.#finishes.submit(finishJob(session, msg.resource, token, held, next));
      if (res.kind !== 'done') {
        const replay = await this.#failReplay(session, msg);
        return replay ?? errorFrame('NOT_HOLDER', 'the lease changed before the failure was recorded', msg.id);
      }
      forgetGrant(session, msg.resource, token);
      const policy = policyOf(held.task.record, this.#ctx.config.retryPolicy);
      const reason = !msg.error.retryable || policy.nonRetryable.includes(msg.error.name) ? 'non_retryable' : 'handler';
      this.#ctx.metrics.taskFailures.inc({ reason, outcome: next.state === 'failed' ? 'failed' : 'retrying' });
      if (next.state === 'failed') this.#observeEnd(next, 'failed');
      this.#ctx.log.info(
        {
          taskId: msg.taskId,
          resource: msg.resource,
          token: msg.token,
          error: msg.error.name,
          outcome: next.state === 'failed' ? 'failed' : 'retrying',
          notBeforeMs: next.notBeforeMs,
        },
        'task attempt failed',
      );
      return this.#failedReply(msg, next);
    });
  }

  #failedReply(msg: Fail, next: TaskRecord): CoordinatorMessage {
    return {
      type: 'task.failed',
      inReplyTo: msg.id,
      taskId: msg.taskId,
      resource: msg.resource,
      token: msg.token,
      outcome: next.state === 'failed' ? 'failed' : 'retrying',
      ...(next.notBeforeMs === undefined ? {} : { notBeforeMs: next.notBeforeMs }),
    };
  }

  /** A task.fail this very session already recorded (its reply was lost): the same answer. */
  async #failReplay(session: LocalSession, msg: Fail): Promise<CoordinatorMessage | undefined> {
    const task = await this.#ctx.store.task(msg.taskId);
    if (task === undefined || !endedBy(task.record, msg.token, 'failed', session)) return undefined;
    return this.#failedReply(msg, task.record);
  }

  /**
   * The grant `token` on `resource` that `session` holds, with its request id (which names the
   * grant's holding key) and its task record: from the grants sent to the session and the
   * watch-fed index, else read from etcd; undefined when the session does not hold that token.
   * Only a hint: the txn compares the owner, holding and task keys.
   */
  async #heldTask(
    session: LocalSession,
    resource: string,
    token: bigint,
  ): Promise<{ readonly requestId: string; readonly task: HeldTask } | undefined> {
    const known = this.#knownHeld(session, resource, token);
    if (known !== undefined) return known;
    const owner = await this.#ctx.store.owner(resource);
    if (!holds(owner, session, token)) return undefined;
    const task: StoredTask | undefined = await this.#ctx.store.task(owner.record.taskId);
    if (task === undefined) return undefined;
    return { requestId: owner.record.requestId, task };
  }

  /**
   * The grant `token` on `resource` that `session` holds, with its request id and task record, as
   * this coordinator knows it without a read: from the watch-fed index, else from the grant it made
   * (`SessionGrant.written`, at mod_revision = the token) while the index has not yet seen it — a
   * completion that arrives a few ms after its grant, before the watch event, needs no read. Only a
   * hint: the end txn compares the owner, holding and task keys. Undefined for a layout-v1 record.
   */
  #knownHeld(
    session: LocalSession,
    resource: string,
    token: bigint,
  ): { readonly requestId: string; readonly task: HeldTask } | undefined {
    const hint = this.#ctx.index.ownerOf(resource);
    if (hint?.token === token && hint.sessionId === session.sessionId) {
      const task = this.#ctx.index.pendingTask(hint.taskId);
      if (task !== undefined && !task.legacy && task.resource === resource) {
        return { requestId: hint.requestId, task: { record: recordOf(task), modRevision: task.modRevision } };
      }
    }
    const mine = session.granted.get(resource);
    if (mine?.token !== token || mine.written === undefined) return undefined;
    return { requestId: mine.requestId, task: { record: mine.written, modRevision: token } };
  }

  async #finishOne(job: FinishJob): Promise<LeaseOutcome> {
    const [settled] = await this.#ctx.store.finish([job]);
    if (settled === undefined) throw new Error('store.finish returned no outcome');
    if (!settled.ok) throw settled.error;
    return settled.value;
  }

  #observeEnd(record: TaskRecord, outcome: 'completed' | 'failed'): void {
    this.#ctx.metrics.taskAttempts.observe({ outcome }, record.attempts);
  }

  /**
   * An attempt's end as a span: a child of the worker's handler span (the frame's `traceparent`),
   * else of the task's submit span (a worker without tracing), ended with the reply.
   */
  async #traced(
    name: string,
    session: LocalSession,
    msg: Complete | Fail | Release,
    taskId: string | undefined,
    run: (span: Span) => Promise<CoordinatorMessage>,
  ): Promise<CoordinatorMessage> {
    const pending = taskId === undefined ? undefined : this.#ctx.index.pendingTask(taskId);
    const stored = pending === undefined ? undefined : traceparentOf(pending);
    const span = tracer.startSpan(
      name,
      {
        attributes: {
          [Attr.RESOURCE]: msg.resource,
          [Attr.TOKEN]: msg.token,
          [Attr.WORKER_ID]: session.workerId,
          [Attr.SESSION_ID]: session.sessionId,
          ...(taskId === undefined ? {} : { [Attr.TASK_ID]: taskId }),
        },
      },
      contextOf(msg.traceparent ?? stored),
    );
    return endWithReply(span, await run(span));
  }

  #guard(session: LocalSession, id: string, run: () => Promise<CoordinatorMessage>): Promise<CoordinatorMessage> {
    return this.#sessions.track(
      session,
      run().catch((err: unknown) => failureReply(err, id)),
    );
  }
}
