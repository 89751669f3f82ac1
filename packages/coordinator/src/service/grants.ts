/**
 * Acquire -> grant, in this order and no other:
 *   (a) one txn creates the owner key (compares: owner absent, task unchanged, session still served
 *       here, request id unused) and records the request id; its revision R is the token;
 *   (b) the sink durably advances the resource's fence to R;
 *   (c) only then is `lease.granted` {token R, capability} sent.
 * If (b) fails or is refused, nothing is sent and the owner key is removed if still ours.
 *
 * Idempotent by request id: the request record (attached to the session lease, created in (a))
 * makes a retry find the same grant; the retry re-runs (b) — an advance to the same token is a
 * no-op at the sink — and sends the same grant (same token, same capability). Concurrent acquires
 * are batched: many owner keys in one txn (falling back to one txn per job when a compare fails)
 * and many advances in one sink call.
 *
 * Long poll: an acquire with `waitMs` that finds nothing grantable waits (up to `waitMs`, the
 * session's end or shutdown) for the watch-fed index to change, then selects again — so a freed
 * resource is granted to a waiting worker as soon as this coordinator sees it free.
 */
import { context, trace, type Span } from '@opentelemetry/api';
import {
  formatToken,
  signCapability,
  type Acquire,
  type CoordinatorMessage,
  type JsonValue,
} from '@leasehold/protocol';
import { abandoned, granted } from '../core/lifecycle.js';
import type { TaskRecord } from '../core/records.js';
import { errorFrame, failureReply } from '../core/replies.js';
import { recordOf, type PendingTask } from '../core/task-index.js';
import type { GrantJob, GrantOutcome, StoredHolding } from '../store/port.js';
import { MicroBatcher } from './batcher.js';
import { lifecycleEnv, type ServiceContext } from './context.js';
import type { LocalSession, SessionManager } from './sessions.js';
import { Attr, contextOf, endWithReply, markFailed, markRefused, traceparentOf, tracer } from './tracing.js';

interface GrantFacts {
  readonly resource: string;
  readonly taskId: string;
  readonly token: bigint;
  readonly payload: JsonValue;
  readonly attempt: number;
  /** The task record the grant txn wrote (fresh grants only: what an abandon starts from). */
  readonly written?: TaskRecord;
  /** `leasehold.lease.grant`: the fence advance runs in its context; `lease.granted` carries it. */
  readonly span: Span;
}

const RETRY = Symbol('retry');

/** A payload as `inputs/<t>` holds it (its JSON); undefined when missing or not JSON. */
function parsePayloadJson(json: string | undefined): JsonValue | undefined {
  if (json === undefined) return undefined;
  try {
    return JSON.parse(json) as JsonValue;
  } catch {
    return undefined;
  }
}
const MAX_CANDIDATES = 4;

/**
 * Where one acquire's time went: wait is the long poll (from the request to the moment a
 * grantable task was found, after the last wake-up); work is the rest, up to the grant (owner txn,
 * fence advance, candidates tried again after a race).
 */
interface GrantTiming {
  readonly receivedAtMs: number;
  /** When the current round started trying candidates; reset when the acquire waits again. */
  workStartMs: number | undefined;
}

export class GrantService {
  readonly #ctx: ServiceContext;
  readonly #sessions: SessionManager;
  readonly #owners: MicroBatcher<GrantJob, GrantOutcome>;
  readonly #inflight = new Map<string, Promise<CoordinatorMessage>>();
  /** Waiting long-poll acquires, oldest first: each is woken once, then re-registers. */
  readonly #waiters = new Set<() => void>();
  #wakeQueued = false;

  constructor(ctx: ServiceContext, sessions: SessionManager) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    this.#owners = new MicroBatcher((jobs) => ctx.store.grant(jobs), ctx.config.grantBatchMax);
  }

  /** Never rejects: every failure is an `error` reply. */
  acquire(session: LocalSession, msg: Acquire, receivedAtMs: number): Promise<CoordinatorMessage> {
    const key = `${session.sessionId}\n${msg.requestId}`;
    const running = this.#inflight.get(key);
    if (running !== undefined) {
      // The same request id is already being served: answer this copy with the same outcome.
      return running.then((reply) => ('inReplyTo' in reply ? { ...reply, inReplyTo: msg.id } : reply));
    }
    // Capacity: held grants plus acquires being served stay within what the hello declared. A
    // retry of a request already granted is a replay, not a new grant.
    const replay = [...session.granted.values()].some((g) => g.requestId === msg.requestId);
    if (!replay && session.granted.size + session.acquiring >= session.capacity) {
      this.#ctx.metrics.grants.inc({ outcome: 'over_capacity' });
      return Promise.resolve(
        errorFrame(
          'CAPACITY_EXCEEDED',
          `${session.granted.size} grants held and ${session.acquiring} acquires in flight: capacity is ${session.capacity}`,
          msg.id,
        ),
      );
    }
    session.acquiring += 1;
    const op = this.#acquire(session, msg, { receivedAtMs, workStartMs: undefined })
      .catch((err: unknown) => failureReply(err, msg.id))
      .finally(() => {
        session.acquiring -= 1;
        this.#inflight.delete(key);
      });
    this.#inflight.set(key, op);
    return this.#sessions.track(session, op);
  }

  /** The index changed (a watch response was applied): waiting acquires select again. */
  wake(): void {
    if (this.#wakeQueued || this.#waiters.size === 0) return;
    this.#wakeQueued = true;
    queueMicrotask(() => {
      this.#wakeQueued = false;
      this.#wakeAll();
    });
  }

  /** Shutdown: waiting acquires answer now. */
  close(): void {
    this.#wakeAll();
  }

  #wakeAll(): void {
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wakeUp of waiters) wakeUp();
  }

  /**
   * Resolves on the next index change, the session's end, after `ms`, or when the earliest delayed
   * task becomes due (the index promotes it on the next select): no polling for backoffs.
   */
  #waitForChange(session: LocalSession, waitMs: number): Promise<void> {
    const due = this.#ctx.index.nextDueMs();
    const ms = due === undefined ? waitMs : Math.min(waitMs, Math.max(1, due - this.#ctx.wallClock()));
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.#ctx.timers.clearTimeout(timer);
        this.#waiters.delete(done);
        session.wakers.delete(done);
        resolve();
      };
      const timer = this.#ctx.timers.setTimeout(done, ms);
      this.#waiters.add(done);
      session.wakers.add(done);
    });
  }

  async #acquire(session: LocalSession, msg: Acquire, timing: GrantTiming): Promise<CoordinatorMessage> {
    const ctx = this.#ctx;
    const waitUntilMs = timing.receivedAtMs + (msg.waitMs ?? 0);
    let requestChecked = false;
    for (;;) {
      if (ctx.state.shuttingDown) return errorFrame('SHUTTING_DOWN', 'coordinator is shutting down', msg.id);
      if (!this.#sessions.isLive(session)) return errorFrame('SESSION_EXPIRED', 'session has expired', msg.id);
      for (let attempt = 0; attempt < MAX_CANDIDATES; attempt += 1) {
        const [candidate] = ctx.index.select(msg.taskId === undefined ? {} : { taskId: msg.taskId });
        if (candidate === undefined) break;
        timing.workStartMs ??= ctx.clock.nowMs();
        const out = await this.#tryGrant(session, msg, candidate, timing);
        if (out !== RETRY) return out;
      }
      // Nothing granted now. A retry of a request granted before (its grant reply lost) must get
      // that grant back, not lease.none. (With a candidate, the grant txn's `request absent`
      // compare catches a retry instead, and #tryGrant replays it.) Once checked, it stays
      // unrecorded while this request is served: copies of it share this promise.
      if (!requestChecked) {
        const recorded = await ctx.store.holding(session.sessionId, msg.requestId);
        if (recorded !== undefined) {
          timing.workStartMs ??= ctx.clock.nowMs();
          return this.#replay(session, msg, recorded, timing);
        }
        requestChecked = true;
      }
      const leftMs = waitUntilMs - ctx.clock.nowMs();
      if (leftMs <= 0 || !this.#sessions.isLive(session)) break;
      timing.workStartMs = undefined;
      await this.#waitForChange(session, Math.min(leftMs, this.#sessions.remainingMs(session) + 1));
    }
    ctx.metrics.grants.inc({ outcome: 'none' });
    return {
      type: 'lease.none',
      inReplyTo: msg.id,
      requestId: msg.requestId,
      retryAfterMs: ctx.config.noLeaseRetryAfterMs,
    };
  }

  async #tryGrant(
    session: LocalSession,
    msg: Acquire,
    candidate: PendingTask,
    timing: GrantTiming,
  ): Promise<CoordinatorMessage | typeof RETRY> {
    const ctx = this.#ctx;
    const { index } = ctx;
    // The index's record of the task (pending, on a resource it believes free) is used as is: the
    // grant txn compares the task's mod_revision and the owner key's absence, so a stale index
    // only fails the txn (then RETRY, held until the index has caught up).
    const { resource, taskId, modRevision: taskModRevision } = candidate;
    const task = recordOf(candidate);
    const attempt = task.attempts + 1;
    const span = this.#startGrantSpan(session, msg, task.traceparent, { taskId, resource, attempt });
    index.hold(resource);
    let settledAt = 0n;
    try {
      if (!this.#sessions.isLive(session)) {
        return endWithReply(span, errorFrame('SESSION_EXPIRED', 'session has expired', msg.id));
      }
      const next = granted(task, { workerId: session.workerId, sessionId: session.sessionId }, ctx.wallClock());
      const res = await this.#owners.submit({
        sessionId: session.sessionId,
        leaseId: session.leaseId,
        sessionModRevision: session.modRevision,
        requestId: msg.requestId,
        task,
        taskModRevision,
        next,
        owner: {
          v: 1,
          taskId,
          sessionId: session.sessionId,
          workerId: session.workerId,
          incarnation: session.incarnation,
          requestId: msg.requestId,
          attempt,
        },
      });
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
      if (payload === undefined) {
        // inputs/<t> is missing or not JSON: a broken invariant (keys removed by hand). The grant is
        // undone before any advance, its attempt given back with a backoff.
        ctx.log.error({ taskId, resource }, 'task payload missing from etcd (inputs/): grant abandoned');
        const facts = { resource, taskId, token: res.token, payload: null, attempt, written: next, span };
        await this.#abandon(session, msg.requestId, facts, 'the task payload is missing from etcd');
        ctx.metrics.grants.inc({ outcome: 'abandoned' });
        return endWithReply(span, errorFrame('INTERNAL', `task ${taskId}: its payload is missing from etcd`, msg.id));
      }
      const facts = { resource, taskId, token: res.token, payload, attempt, written: next, span };
      return endWithReply(span, await this.#fenceAndDeliver(session, msg, facts, timing, true));
    } catch (err) {
      // (A replay's span ended before #replay ran: isRecording is false once ended.)
      if (span.isRecording()) {
        markFailed(span, err);
        span.end();
      }
      throw err;
    } finally {
      index.holdUntil(resource, settledAt);
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
    if (owner?.token !== recorded.token || owner.record.sessionId !== session.sessionId) {
      this.#ctx.metrics.grants.inc({ outcome: 'ended' });
      return errorFrame(
        'NOT_HOLDER',
        `the grant recorded for request ${msg.requestId} (token ${formatToken(recorded.token)}) has ended`,
        msg.id,
      );
    }
    const payload = parsePayloadJson(payloadJson);
    if (task === undefined || payload === undefined) {
      return errorFrame('INTERNAL', `task ${taskId} (or its payload) of a live grant is missing`, msg.id);
    }
    const span = this.#startGrantSpan(session, msg, task.record.traceparent, { taskId, resource, attempt });
    span.setAttributes({ [Attr.TOKEN]: formatToken(recorded.token), 'leasehold.replay': true });
    const facts = { resource, taskId, token: recorded.token, payload, attempt, span };
    try {
      return endWithReply(span, await this.#fenceAndDeliver(session, msg, facts, timing, false));
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

  /** Steps (b) and (c). */
  async #fenceAndDeliver(
    session: LocalSession,
    msg: Acquire,
    grant: GrantFacts,
    timing: GrantTiming,
    fresh: boolean,
  ): Promise<CoordinatorMessage> {
    const ctx = this.#ctx;
    // Built only when something goes wrong: a child logger per grant is measurable at 10k grants/s.
    const log = () =>
      ctx.log.child({ sessionId: session.sessionId, resource: grant.resource, token: formatToken(grant.token) });
    if (ctx.config.testSabotage === 'grant-before-advance') {
      // TEST ONLY (refused without LEASEHOLD_ALLOW_SABOTAGE=1): the broken order the chaos checker
      // must catch. The grant goes out now; the fence moves a second later.
      ctx.timers.setTimeout(() => {
        ctx.fences.submit({ resource: grant.resource, token: grant.token }).catch((err: unknown) => {
          log().warn({ err }, 'sabotaged late advance failed');
        });
      }, 1_000);
      return this.#grantMessage(session, msg, grant, timing, fresh);
    }
    const { span } = grant;
    try {
      // In the grant span's context: a batch of one carries it to the sink as `traceparent`.
      const advanced = await context.with(trace.setSpan(context.active(), span), () =>
        ctx.fences.submit({ resource: grant.resource, token: grant.token }),
      );
      span.addEvent('fence.advance', {
        [Attr.OUTCOME]: advanced.ok ? advanced.outcome : advanced.code,
        [Attr.FENCE]: formatToken(advanced.fence),
      });
      if (!advanced.ok) {
        span.setAttribute(Attr.OUTCOME, 'abandoned');
        markRefused(span, advanced.code, 'the sink refused the fence advance: grant abandoned');
        log().warn({ fence: formatToken(advanced.fence) }, 'fence advance refused, grant abandoned');
        await this.#abandon(
          session,
          msg.requestId,
          grant,
          `the sink refused the fence advance (fence ${formatToken(advanced.fence)})`,
        );
        ctx.metrics.grants.inc({ outcome: 'abandoned' });
        return fresh
          ? {
              type: 'lease.none',
              inReplyTo: msg.id,
              requestId: msg.requestId,
              retryAfterMs: ctx.config.noLeaseRetryAfterMs,
            }
          : errorFrame('NOT_HOLDER', 'the recorded grant was superseded at the sink', msg.id, {
              fence: formatToken(advanced.fence),
            });
      }
    } catch (err) {
      span.setAttribute(Attr.OUTCOME, 'advance_failed');
      markFailed(span, err);
      const gate = ctx.repeats.note('grant advance', ctx.clock.nowMs());
      if (gate.log) log().warn({ err, repeated: gate.suppressed }, 'fence advance failed, grant not sent');
      // A replayed grant may already be in the worker's hands: keep it; the worker retries.
      if (fresh) await this.#abandon(session, msg.requestId, grant, `the fence advance failed: ${String(err)}`);
      ctx.metrics.grants.inc({ outcome: 'error' });
      return failureReply(err, msg.id);
    }
    if (!this.#sessions.isLive(session)) {
      return errorFrame('SESSION_EXPIRED', 'session expired before the grant could be sent', msg.id);
    }
    return this.#grantMessage(session, msg, grant, timing, fresh);
  }

  /** Step (c): the grant, with its capability. */
  #grantMessage(
    session: LocalSession,
    msg: Acquire,
    grant: GrantFacts,
    timing: GrantTiming,
    fresh: boolean,
  ): CoordinatorMessage {
    const ctx = this.#ctx;
    const capability = signCapability(ctx.config.capabilitySigningKey, {
      resource: grant.resource,
      token: grant.token,
      workerId: session.workerId,
      incarnation: session.incarnation,
    });
    session.granted.set(grant.resource, { token: grant.token, requestId: msg.requestId });
    ctx.metrics.grants.inc({ outcome: fresh ? 'granted' : 'replayed' });
    grant.span.setAttribute(Attr.OUTCOME, fresh ? 'granted' : 'replayed');
    const traceparent = traceparentOf(grant.span);
    const nowMs = ctx.clock.nowMs();
    const workStartMs = timing.workStartMs ?? nowMs;
    ctx.metrics.grantWait.observe(Math.max(0, workStartMs - timing.receivedAtMs) / 1_000);
    ctx.metrics.grantWork.observe(Math.max(0, nowMs - workStartMs) / 1_000);
    if (ctx.log.isLevelEnabled('debug')) {
      ctx.log.debug(
        { sessionId: session.sessionId, resource: grant.resource, token: formatToken(grant.token), replay: !fresh },
        'lease granted',
      );
    }
    return {
      type: 'lease.granted',
      inReplyTo: msg.id,
      requestId: msg.requestId,
      taskId: grant.taskId,
      resource: grant.resource,
      token: formatToken(grant.token),
      capability,
      ttlMs: Math.max(1, Math.floor(this.#sessions.remainingMs(session))),
      payload: grant.payload,
      attempt: grant.attempt,
      ...(traceparent === undefined ? {} : { traceparent }),
    };
  }

  /**
   * The grant will never be sent: remove it, and close its attempt (given back, with the task's
   * backoff for abandoned grants, so a sink outage costs a bounded number of grant attempts).
   */
  async #abandon(session: LocalSession, requestId: string, grant: GrantFacts, reason: string): Promise<void> {
    const ctx = this.#ctx;
    const written = grant.written;
    const next =
      written === undefined ? undefined : abandoned(written, grant.token, reason.slice(0, 500), lifecycleEnv(ctx));
    const ref = {
      sessionId: session.sessionId,
      requestId,
      resource: grant.resource,
      token: grant.token,
      ...(next === undefined ? {} : { next }),
    };
    try {
      const outcome = await ctx.store.abandonGrant(ref);
      ctx.metrics.lifecycle.inc({ change: 'abandon', outcome });
    } catch (err) {
      this.#ctx.log.warn({ err, resource: grant.resource }, 'could not remove an unsent grant; the session end will');
    }
  }
}
