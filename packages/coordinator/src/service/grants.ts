/**
 * Acquire -> grant, in this order and no other:
 *   (a) one txn creates the owner key (compares: owner absent, task unchanged, session still served
 *       here, request id unused) and records the request id; its revision R is the token;
 *   (b) the sink durably advances the resource's fence to R;
 *   (c) only then is `lease.granted` {token R, capability} sent.
 * If (b) fails or is refused, nothing is sent and the owner key is removed if still ours.
 * (a) is here; (b) and (c) are grant-delivery.ts; the pure decisions are core/grant-decisions.ts.
 *
 * Idempotent by request id: the request record (attached to the session lease, created in (a))
 * makes a retry find the same grant; the retry re-runs (b) — an advance to the same token is a
 * no-op at the sink — and sends the same grant (same token, same capability). Concurrent acquires
 * are batched: many owner keys in one txn (when a compare fails, the jobs that lost a race are told
 * so from the txn's failure branch and the rest go again together; see etcd/transactions/grant-txns.ts)
 * and many advances in one sink call.
 *
 * Long poll: an acquire with `waitMs` that finds nothing grantable waits (up to `waitMs`, the
 * session's end or shutdown) for the watch-fed index to change, then selects again — so a freed
 * resource is granted to a waiting worker as soon as this coordinator sees it free. Queues: an
 * acquire selects only from its session's queues (or the subset it names), the queues taking turns
 * (core/queues.ts), and a waiting acquire is woken only by a change that readied one of them.
 */
import type { Span } from '@opentelemetry/api';
import { formatToken, type Acquire, type CoordinatorMessage } from '@leasehold/protocol';
import type { CoordinatorConfig } from '../config.js';
import {
  admitAcquire,
  isTakeover,
  MAX_CANDIDATES,
  noLease,
  parsePayloadJson,
  needsRequestRead,
  pollDelayMs,
  replayVerdict,
  type RequestIds,
} from '../core/grant-decisions.js';
import { granted } from '../core/lifecycle.js';
import type { CoordinatorPeers } from '../core/peers.js';
import { acquireQueues } from '../core/queues.js';
import { EarliestTimer } from '../core/timers.js';
import { WaitingAcquires, type WakeUp } from '../core/waiting-acquires.js';
import { errorFrame, failureReply } from '../core/replies.js';
import { recordOf, type PendingTask, type TaskIndex } from '../core/task-index.js';
import type { Metrics } from '../metrics.js';
import type { GrantJob, GrantOutcome, LeaseStore, StoredHolding } from '../store/port.js';
import { MicroBatcher } from '@leasehold/sink-client';
import type { CoordinatorState } from './context.js';
import { GrantDelivery, type DeliveryContext, type GrantTiming } from './grant-delivery.js';
import { MAX_UNSURE_REQUESTS, type LocalSession, type SessionRegistry } from './local-session.js';
import { Attr, contextOf, endWithReply, markFailed, tracer } from './tracing.js';

/** What the grant service uses. */
export interface GrantsContext extends DeliveryContext {
  readonly config: Pick<CoordinatorConfig, 'grantBatchMax' | 'noLeaseRetryAfterMs' | 'retryPolicy'>;
  readonly store: Pick<LeaseStore, 'grant' | 'holding' | 'grantedTask' | 'abandonGrant'>;
  readonly index: Pick<TaskIndex, 'select' | 'hold' | 'holdUntil' | 'nextDueMs' | 'promoteDue' | 'takeReadied'>;
  readonly state: Readonly<Pick<CoordinatorState, 'shuttingDown'>>;
  readonly metrics: DeliveryContext['metrics'] & Pick<Metrics, 'acquiresWaiting' | 'acquireWakes' | 'batchItems'>;
  /**
   * With peers serving sessions too, selection prefers the resources assigned to this coordinator
   * (core/peers.ts), so coordinators do not all race for the same oldest task. Absent: plain order.
   */
  readonly peers?: { readonly coordinatorId: string; readonly table: Pick<CoordinatorPeers, 'members' | 'assignee'> };
}

const RETRY = Symbol('retry');

/** What the request-id decisions (admitAcquire, needsRequestRead) see of a session. */
function requestView(session: LocalSession): {
  requestsKnown: boolean;
  grantedRequestIds: RequestIds;
  unsureRequestIds: RequestIds;
} {
  return {
    requestsKnown: session.requestsKnown,
    grantedRequestIds: session.granted,
    unsureRequestIds: session.unsureRequests,
  };
}

/**
 * A grant txn of `requestId` failed without an answer (it may have been applied): until an acquire
 * of that id reads its holding, an acquire of it that finds nothing grantable must read it (else a
 * grant made by that txn would be held for as long as the session lives, its worker told
 * `lease.none`). Bounded: past MAX_UNSURE_REQUESTS the session reads for every request.
 */
function markUnsure(session: LocalSession, requestId: string): void {
  if (session.unsureRequests.size >= MAX_UNSURE_REQUESTS) {
    session.requestsKnown = false;
    session.unsureRequests.clear();
    return;
  }
  session.unsureRequests.add(requestId);
}

/** One grant being made: the task selected and held, the txn's job, and its span. */
interface GrantAttempt {
  readonly resource: string;
  readonly taskId: string;
  readonly takeover: boolean;
  readonly attempt: number;
  readonly job: GrantJob;
  readonly span: Span;
}

/**
 * A carried acquire made ready to be granted in its completion's own finish txn (see
 * {@link GrantService.joinCarried}): `job` goes in the finish; `settle` is told what the txn did
 * with it and answers the acquire.
 */
export interface JoinedAcquire {
  readonly job: GrantJob;
  /**
   * The grant's outcome in the finish txn; or undefined when it was not tried (the finish was
   * refused, or sent without it), with `unsure` when the finish txn failed unanswered (it may have
   * been applied, the grant with it). Never rejects: resolves with the acquire's answer.
   */
  settle(outcome: GrantOutcome | undefined, unsure: boolean): Promise<CoordinatorMessage>;
  /** Not tried, and not to be taken (its connection closed): the task given back, nothing answered. */
  cancel(unsure: boolean): void;
}

/** Optional hooks of one acquire. */
export interface AcquireHooks {
  /** Called each time the acquire starts to wait for the index to change (nothing grantable now). */
  readonly onWait?: () => void;
}

export class GrantService {
  readonly #ctx: GrantsContext;
  readonly #sessions: SessionRegistry;
  readonly #delivery: GrantDelivery;
  readonly #owners: MicroBatcher<GrantJob, GrantOutcome>;
  /** Takeover grants: a group commit of their own, so they do not wait behind the ordinary one in flight. */
  readonly #takeoverOwners: MicroBatcher<GrantJob, GrantOutcome>;
  readonly #inflight = new Map<string, Promise<CoordinatorMessage>>();
  /**
   * Waiting long-poll acquires, oldest first per queue: each is woken once, then waits again. A
   * change wakes one per readied queue, which passes the wake on when it selects a task
   * (core/waiting-acquires.ts).
   */
  readonly #waiters = new WaitingAcquires();
  #wakeQueued = false;
  /**
   * One timer for every waiting acquire: it fires when the index's earliest delayed task comes due
   * (epoch ms), promotes the due tasks and wakes the chains of their queues. No waiting
   * acquire times its wait by a due time, so a due time wakes no more than a submit would.
   */
  readonly #due: EarliestTimer;

  /** Whether a resource is assigned to this coordinator among those serving sessions. */
  readonly #assignedHere = (resource: string): boolean => {
    const peers = this.#ctx.peers;
    return peers === undefined || peers.table.assignee(resource) === peers.coordinatorId;
  };

  /** Other coordinators serve sessions too (and this one is among them, as the watch has seen). */
  #sharing(): boolean {
    const peers = this.#ctx.peers;
    return peers !== undefined && peers.table.members.length >= 2 && peers.table.members.includes(peers.coordinatorId);
  }

  constructor(ctx: GrantsContext, sessions: SessionRegistry) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    this.#delivery = new GrantDelivery(ctx, sessions);
    const grants = (kind: string, urgent: boolean) =>
      new MicroBatcher((jobs: readonly GrantJob[]) => ctx.store.grant(jobs, { urgent }), ctx.config.grantBatchMax, {
        observe: (n) => {
          ctx.metrics.batchItems.observe({ kind }, n);
        },
      });
    this.#owners = grants('grant', false);
    // Takeovers: their txns never wait to share an etcd request with ordinary work.
    this.#takeoverOwners = grants('grant_takeover', true);
    this.#due = new EarliestTimer(
      ctx.timers,
      () => ctx.wallClock(),
      () => {
        ctx.index.promoteDue();
        this.wake();
      },
      1,
    );
  }

  /**
   * Never rejects: every failure is an `error` reply. `hooks` are this call's own: a copy of a
   * request id already being served shares that request's outcome and calls none of them.
   */
  acquire(
    session: LocalSession,
    msg: Acquire,
    receivedAtMs: number,
    hooks: AcquireHooks = {},
  ): Promise<CoordinatorMessage> {
    const key = `${session.sessionId}\n${msg.requestId}`;
    const running = this.#inflight.get(key);
    if (running !== undefined) {
      // The same request id is already being served: answer this copy with the same outcome.
      return running.then((reply) => ('inReplyTo' in reply ? { ...reply, inReplyTo: msg.id } : reply));
    }
    const queues = acquireQueues(session.queues, msg.queues);
    if (!queues.ok) return Promise.resolve(errorFrame('INVALID_MESSAGE', queues.message, msg.id));
    const admitted = admitAcquire(
      {
        grantedRequestIds: session.granted,
        held: session.granted.size,
        acquiring: session.acquiring,
        capacity: session.capacity,
      },
      msg.requestId,
    );
    if (!admitted.ok) {
      this.#ctx.metrics.grants.inc({ outcome: 'over_capacity' });
      return Promise.resolve(errorFrame('CAPACITY_EXCEEDED', admitted.message, msg.id));
    }
    session.acquiring += 1;
    const op = this.#acquire(session, msg, queues.queues, { receivedAtMs, workStartMs: undefined }, hooks)
      .catch((err: unknown) => failureReply(err, msg.id))
      .finally(() => {
        session.acquiring -= 1;
        this.#inflight.delete(key);
      });
    this.#inflight.set(key, op);
    return this.#sessions.track(session, op);
  }

  /**
   * Make `msg`, an acquire carried by the completion of the grant `completing` (which `session`
   * holds), ready to be granted in that completion's own finish txn (issue 27: one etcd txn and one
   * watch revision per task instead of two). The grant is nested under the finish's compares, so
   * it is made only if the finish is: it is admitted as if the completed lease had ended, and the
   * session never holds both. Undefined when it cannot ride along (a copy of its request id being
   * served, a retry of a granted request, capacity, bad queues, nothing grantable now, a takeover
   * task — whose grants have their own urgent txns): the caller then takes it as a lone acquire
   * once the completion is answered, as before.
   */
  joinCarried(
    session: LocalSession,
    msg: Acquire,
    receivedAtMs: number,
    hooks: AcquireHooks,
    completing: { readonly resource: string; readonly token: bigint },
  ): JoinedAcquire | undefined {
    const ctx = this.#ctx;
    const key = `${session.sessionId}\n${msg.requestId}`;
    if (this.#inflight.has(key) || ctx.state.shuttingDown || !this.#sessions.isLive(session)) return undefined;
    if (session.granted.get(completing.resource)?.token !== completing.token) return undefined;
    if (session.granted.has(msg.requestId) || session.unsureRequests.has(msg.requestId)) return undefined;
    const queues = acquireQueues(session.queues, msg.queues);
    if (!queues.ok) return undefined;
    // The completed lease, and those of other acquires riding in their completions' txns, are
    // ended by the txn that grants in their place: each counts once, as its acquire.
    const view = {
      grantedRequestIds: session.granted,
      held: session.granted.size - session.carrying - 1,
      acquiring: session.acquiring,
      capacity: session.capacity,
    };
    if (!admitAcquire(view, msg.requestId).ok) return undefined;
    const [candidate] = ctx.index.select(this.#query(session, queues.queues, msg.taskId));
    if (candidate === undefined || candidate.resource === completing.resource || isTakeover(recordOf(candidate))) {
      return undefined;
    }
    const attempt = this.#startAttempt(session, msg, candidate);
    const timing: GrantTiming = { receivedAtMs, workStartMs: ctx.clock.nowMs() };
    session.acquiring += 1;
    session.carrying += 1;
    let carrying = true;
    /** The finish is answered: from now on its lease is in `granted` only if it was not ended. */
    const landed = (): void => {
      if (carrying) session.carrying -= 1;
      carrying = false;
    };
    let answer!: (reply: Promise<CoordinatorMessage>) => void;
    const answered = new Promise<CoordinatorMessage>((resolve) => {
      answer = resolve;
    });
    this.#inflight.set(key, answered);
    const done = (): void => {
      session.acquiring -= 1;
      this.#inflight.delete(key);
    };
    /** Not tried: the task given back, the request no longer in flight here. */
    const giveBack = (unsure: boolean): void => {
      landed();
      ctx.index.holdUntil(attempt.resource, 0n);
      attempt.span.setAttribute(Attr.OUTCOME, 'not_carried');
      attempt.span.end();
      if (unsure) markUnsure(session, msg.requestId);
      done();
    };
    return {
      job: attempt.job,
      settle: (outcome, unsure) => {
        if (outcome === undefined) {
          // Taken as a lone acquire arriving now (admitted afresh: the completed lease may be held).
          giveBack(unsure);
          const reply = this.acquire(session, msg, ctx.clock.nowMs(), hooks);
          answer(reply);
          return reply;
        }
        landed();
        const run = async (): Promise<CoordinatorMessage> => {
          const out = await this.#afterGrantTxn(session, msg, attempt, outcome, timing);
          return out === RETRY ? this.#acquire(session, msg, queues.queues, timing, hooks) : out;
        };
        const reply = this.#sessions.track(
          session,
          run()
            .catch((err: unknown) => failureReply(err, msg.id))
            .finally(done),
        );
        answer(reply);
        return reply;
      },
      cancel: (unsure) => {
        giveBack(unsure);
        // Only a copy of this request id that arrived meanwhile (a retry on a new connection) hears
        // this: it asks again, and is then served as a lone acquire.
        answer(
          Promise.resolve(
            errorFrame('UNAVAILABLE', 'the request was being served for a connection that closed: ask again', msg.id),
          ),
        );
      },
    };
  }

  /**
   * The index changed (a watch response was applied, owners were freed): waiting acquires that
   * serve a queue which gained a grantable task select again. With none waiting, the readied
   * queues are forgotten: an acquire that waits later has selected since.
   */
  wake(): void {
    if (this.#waiters.size === 0) {
      this.#ctx.index.takeReadied();
      return;
    }
    this.#armDue();
    if (this.#wakeQueued) return;
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      const readied = this.#ctx.index.takeReadied();
      for (const [wakeUp, baton] of this.#waiters.wakesFor(readied)) wakeUp(baton);
    });
  }

  /**
   * While acquires wait, keep the due timer set for the index's earliest delayed task: set it when
   * there is none, or when a delayed task comes due before the time it is set for. (Set later than
   * needed it fires, promotes nothing and is set again; with no acquire waiting it is not set again:
   * an acquire selects, which promotes, before it waits, and its wait sets the timer.)
   */
  #armDue(): void {
    if (this.#ctx.state.shuttingDown) return; // (close() after etcd was unreachable is not the end)
    const dueMs = this.#ctx.index.nextDueMs();
    // A due time already past (the task came due since the last select) fires at once.
    if (dueMs !== undefined) this.#due.setBy(dueMs);
  }

  /**
   * The session's worker is closing (`session.drain`): its waiting acquires select once more and
   * answer now, and its later acquires do not wait.
   */
  drain(session: LocalSession): void {
    session.draining = true;
    for (const wakeUp of [...session.wakers]) wakeUp();
  }

  /** Shutdown: waiting acquires answer now. */
  close(): void {
    this.#due.clear();
    this.#wakeAll();
  }

  #wakeAll(): void {
    for (const wakeUp of this.#waiters.all()) wakeUp();
  }

  /** Pass `queue`'s wake on to its next waiting acquire (this one selected a task, or could not select). */
  #passOn(queue: string | undefined): void {
    if (queue !== undefined) this.#waiters.next(queue)?.(queue);
  }

  /**
   * Resolves on the next index change that readies one of `queues` (a delayed task coming due is
   * one: the due timer promotes it), the session's end, or after `ms`: no polling for backoffs.
   * Resolves with the queue whose wake chain this acquire now carries, when a change woke it for
   * one. With `taskId` (an acquire of one task): woken when that task became grantable, never a chain.
   */
  #waitForChange(
    session: LocalSession,
    queues: readonly string[],
    ms: number,
    taskId: string | undefined,
  ): Promise<string | undefined> {
    return new Promise<string | undefined>((resolve) => {
      let parked = true; // counted in the gauge once, however many of timer, wake and end fire
      const done: WakeUp = (baton) => {
        if (!parked) return;
        this.#ctx.metrics.acquiresWaiting.dec();
        parked = false;
        this.#ctx.timers.clearTimeout(timer);
        this.#waiters.remove(done);
        session.wakers.delete(done);
        resolve(baton);
      };
      const timer = this.#ctx.timers.setTimeout(() => {
        done();
      }, ms);
      this.#waiters.add(done, queues, taskId);
      session.wakers.add(done);
      this.#ctx.metrics.acquiresWaiting.inc();
      this.#armDue();
    });
  }

  async #acquire(
    session: LocalSession,
    msg: Acquire,
    queues: readonly string[],
    timing: GrantTiming,
    hooks: AcquireHooks,
  ): Promise<CoordinatorMessage> {
    const ctx = this.#ctx;
    const waitUntilMs = timing.receivedAtMs + (msg.waitMs ?? 0);
    let requestChecked = false;
    /** The queue whose wake chain this acquire carries (woken for it), until its next select. */
    let baton: string | undefined;
    for (;;) {
      if (ctx.state.shuttingDown || !this.#sessions.isLive(session)) {
        this.#passOn(baton);
        return ctx.state.shuttingDown
          ? errorFrame('SHUTTING_DOWN', 'coordinator is shutting down', msg.id)
          : errorFrame('SESSION_EXPIRED', 'session has expired', msg.id);
      }
      for (let attempt = 0; attempt < MAX_CANDIDATES; attempt += 1) {
        const [candidate] = ctx.index.select(this.#query(session, queues, msg.taskId));
        if (baton !== undefined) {
          // Took a task: the next waiting acquire of the queue may find another (before this one
          // grants, so the chain does not wait for etcd). Found none: nothing there is grantable.
          ctx.metrics.acquireWakes.inc({ result: candidate === undefined ? 'empty' : 'selected' });
          if (candidate !== undefined) this.#passOn(baton);
          baton = undefined;
        }
        if (candidate === undefined) break;
        timing.workStartMs ??= ctx.clock.nowMs();
        const out = await this.#tryGrant(session, msg, candidate, timing);
        if (out !== RETRY) return out;
      }
      // Nothing granted now. A retry of a request granted before (its grant reply lost) must get
      // that grant back, not lease.none. (With a candidate, the grant txn's `request absent`
      // compare catches a retry instead, and #tryGrant replays it.) Once checked, it stays
      // unrecorded while this request is served: copies of it share this promise. The read
      // awaits etcd: what the index gained meanwhile woke no one (this acquire did not wait yet),
      // so select again before waiting — from that select to the wait nothing awaits. A session
      // whose every request arrived here on its current connection skips the read unless the id
      // is one of its grants (needsRequestRead): an idle slot's long polls then cost no etcd call.
      if (!requestChecked && !needsRequestRead(requestView(session), msg.requestId)) requestChecked = true;
      if (!requestChecked) {
        const recorded = await ctx.store.holding(session.sessionId, msg.requestId);
        session.unsureRequests.delete(msg.requestId); // read: what it holds is known now
        if (recorded !== undefined) {
          timing.workStartMs ??= ctx.clock.nowMs();
          return this.#replay(session, msg, recorded, timing);
        }
        requestChecked = true;
        continue;
      }
      // A session that ended since the check above (its deadline passed during the select) is
      // answered SESSION_EXPIRED by that check, not lease.none: the worker must open a new one.
      if (!this.#sessions.isLive(session)) continue;
      const leftMs = waitUntilMs - ctx.clock.nowMs();
      if (leftMs <= 0 || session.draining) break;
      timing.workStartMs = undefined;
      hooks.onWait?.();
      const waitMs = pollDelayMs(leftMs, this.#sessions.remainingMs(session));
      baton = await this.#waitForChange(session, queues, waitMs, msg.taskId);
    }
    ctx.metrics.grants.inc({ outcome: 'none' });
    return noLease(msg.id, msg.requestId, ctx.config.noLeaseRetryAfterMs);
  }

  /** What an acquire selects from: its queues in turn, or its one task id. */
  #query(session: LocalSession, queues: readonly string[], taskId: string | undefined) {
    const turn = session.queueTurn++;
    return taskId === undefined
      ? { queues, turn, ...(this.#sharing() ? { prefer: this.#assignedHere } : {}) }
      : { queues, turn, taskId };
  }

  /**
   * Start granting `candidate` to `session`: the task held in the index (until the grant txn's
   * outcome is known, {@link #afterGrantTxn}), its span started, and the txn's job. The index's
   * record of the task (pending, on a resource it believes free) is used as is: the grant txn
   * compares the task's mod_revision and the owner key's absence, so a stale index only fails the
   * txn (then RETRY, held until the index has caught up).
   */
  #startAttempt(session: LocalSession, msg: Acquire, candidate: PendingTask): GrantAttempt {
    const ctx = this.#ctx;
    const { resource, taskId, modRevision: taskModRevision } = candidate;
    const task = recordOf(candidate);
    const attempt = task.attempts + 1;
    const span = this.#startGrantSpan(session, msg, task.traceparent, { taskId, resource, attempt });
    ctx.index.hold(resource);
    const job: GrantJob = {
      sessionId: session.sessionId,
      leaseId: session.leaseId,
      sessionModRevision: session.modRevision,
      requestId: msg.requestId,
      task,
      taskModRevision,
      next: granted(task, { workerId: session.workerId, sessionId: session.sessionId }, ctx.wallClock()),
      owner: {
        v: 1,
        taskId,
        sessionId: session.sessionId,
        workerId: session.workerId,
        incarnation: session.incarnation,
        requestId: msg.requestId,
        attempt,
      },
    };
    return { resource, taskId, takeover: isTakeover(task), attempt, job, span };
  }

  async #tryGrant(
    session: LocalSession,
    msg: Acquire,
    candidate: PendingTask,
    timing: GrantTiming,
  ): Promise<CoordinatorMessage | typeof RETRY> {
    const a = this.#startAttempt(session, msg, candidate);
    if (!this.#sessions.isLive(session)) {
      this.#ctx.index.holdUntil(a.resource, 0n);
      return endWithReply(a.span, errorFrame('SESSION_EXPIRED', 'session has expired', msg.id));
    }
    let res: GrantOutcome;
    try {
      res = await (a.takeover ? this.#takeoverOwners : this.#owners).submit(a.job);
    } catch (err) {
      // The txn's outcome is unknown (or it was refused): a retry of this request id must read.
      markUnsure(session, msg.requestId);
      this.#ctx.index.holdUntil(a.resource, 0n);
      markFailed(a.span, err);
      a.span.end();
      throw err;
    }
    return this.#afterGrantTxn(session, msg, a, res, timing);
  }

  /** What a grant txn's outcome `res` means for `a`: a reply, or RETRY (select again). */
  async #afterGrantTxn(
    session: LocalSession,
    msg: Acquire,
    a: GrantAttempt,
    res: GrantOutcome,
    timing: GrantTiming,
  ): Promise<CoordinatorMessage | typeof RETRY> {
    const ctx = this.#ctx;
    const { resource, taskId, attempt, span } = a;
    let settledAt = 0n;
    try {
      span.addEvent('etcd.txn', { 'leasehold.txn': 'grant_owners', [Attr.OUTCOME]: res.kind });
      switch (res.kind) {
        case 'replay':
          span.setAttribute(Attr.OUTCOME, 'replay');
          span.end();
          return await this.#replay(session, msg, res.holding, timing);
        case 'sessionMoved':
          return endWithReply(
            span,
            errorFrame('SESSION_EXPIRED', 'session is no longer served by this coordinator', msg.id),
          );
        case 'raced':
          settledAt = res.revision;
          span.setAttribute(Attr.OUTCOME, 'raced');
          span.end();
          return RETRY;
        case 'granted':
          break;
      }
      settledAt = res.token;
      span.setAttribute(Attr.TOKEN, formatToken(res.token));
      const payload = parsePayloadJson(res.payloadJson);
      const next = a.job.next;
      if (payload === undefined) {
        // inputs/<t> is missing or not JSON: a broken invariant (keys removed by hand). The grant is
        // undone before any advance, its attempt given back with a backoff.
        ctx.log.error({ taskId, resource }, 'task payload missing from etcd (inputs/): grant abandoned');
        const facts = { resource, taskId, token: res.token, payload: null, attempt, written: next, span };
        await this.#delivery.abandon(session, msg.requestId, facts, 'the task payload is missing from etcd');
        ctx.metrics.grants.inc({ outcome: 'abandoned' });
        return endWithReply(span, errorFrame('INTERNAL', `task ${taskId}: its payload is missing from etcd`, msg.id));
      }
      const facts = { resource, taskId, token: res.token, payload, attempt, written: next, span, takeover: a.takeover };
      return endWithReply(span, await this.#delivery.fenceAndDeliver(session, msg, facts, timing, true));
    } catch (err) {
      // (A replay's span ended before #replay ran: isRecording is false once ended.)
      if (span.isRecording()) {
        markFailed(span, err);
        span.end();
      }
      throw err;
    } finally {
      ctx.index.holdUntil(resource, settledAt);
    }
  }

  /** The request id was granted before: the same grant again, if it is still held. */
  async #replay(
    session: LocalSession,
    msg: Acquire,
    recorded: StoredHolding,
    timing: GrantTiming,
  ): Promise<CoordinatorMessage> {
    const { resource, taskId, attempt } = recorded.record;
    const { owner, task, payloadJson } = await this.#ctx.store.grantedTask(resource, taskId);
    const verdict = replayVerdict({
      recordedToken: recorded.token,
      sessionId: session.sessionId,
      owner,
      task,
      payload: parsePayloadJson(payloadJson),
    });
    if (!verdict.ok) {
      if (verdict.code === 'INTERNAL') {
        return errorFrame('INTERNAL', `task ${taskId} (or its payload) of a live grant is missing`, msg.id);
      }
      this.#ctx.metrics.grants.inc({ outcome: 'ended' });
      return errorFrame(
        'NOT_HOLDER',
        `the grant recorded for request ${msg.requestId} (token ${formatToken(recorded.token)}) has ended`,
        msg.id,
      );
    }
    const span = this.#startGrantSpan(session, msg, verdict.task.record.traceparent, { taskId, resource, attempt });
    span.setAttributes({ [Attr.TOKEN]: formatToken(recorded.token), 'leasehold.replay': true });
    const facts = { resource, taskId, token: recorded.token, payload: verdict.payload, attempt, span };
    try {
      return endWithReply(span, await this.#delivery.fenceAndDeliver(session, msg, facts, timing, false));
    } catch (err) {
      markFailed(span, err);
      span.end();
      throw err;
    }
  }

  /** `leasehold.lease.grant`, a child of the task's submit span (its traceparent in the task record). */
  #startGrantSpan(
    session: LocalSession,
    msg: Acquire,
    traceparent: string | undefined,
    grant: { readonly taskId: string; readonly resource: string; readonly attempt: number },
  ): Span {
    return tracer.startSpan(
      'leasehold.lease.grant',
      {
        attributes: {
          [Attr.TASK_ID]: grant.taskId,
          [Attr.RESOURCE]: grant.resource,
          [Attr.ATTEMPT]: grant.attempt,
          [Attr.WORKER_ID]: session.workerId,
          [Attr.SESSION_ID]: session.sessionId,
          [Attr.REQUEST_ID]: msg.requestId,
        },
      },
      contextOf(traceparent),
    );
  }
}
