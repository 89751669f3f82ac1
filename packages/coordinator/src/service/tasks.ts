/**
 * The task API behind HTTP: submit (idempotent by task id), read, list, cancel, retry, purge, and
 * the view of a resource's current owner. Refusals (NOT_FOUND, CONFLICT, INVALID_MESSAGE) are
 * returned as data.
 */
import {
  formatToken,
  MAX_ATTEMPTS_LIMIT,
  MAX_DELAY_MS,
  type AttemptView,
  type ErrorCode,
  type JsonValue,
  type OwnerView,
  type ResourceOwnerView,
  type RetryPolicyInput,
  type TaskRetention,
  type TaskStateName,
  type TaskView,
  type TerminalTaskState,
} from '@leasehold/protocol';
import type { Span } from '@opentelemetry/api';
import { ExponentialBackoff, handleAll, retry as retryPolicy } from 'cockatiel';
import { cancelled, lastEventOf, newTask, policyOf, retried, viewState } from '../core/lifecycle.js';
import {
  encodeTask,
  MAX_TASK_RECORD_BYTES,
  RECORD_GROWTH_BYTES,
  sameDefinition,
  utf8Bytes,
  type AttemptRecord,
  type TaskRecord,
} from '../core/task-record.js';
import { CoordinatorError } from '../errors.js';
import { payloadDigest } from '../payload-digest.js';
import type { NewTask, StoredOwner, StoredTask } from '../store/port.js';
import type { ServiceContext } from './context.js';
import type { SessionManager } from './sessions.js';
import { Attr, markRefused, traceparentOf, tracer } from './tracing.js';

export type { OwnerView, TaskView, ResourceOwnerView as ResourceView } from '@leasehold/protocol';

/** TEST ONLY: the policy the `ignore-retry-policy` sabotage stores instead of the submitted one. */
const IGNORED_RETRY_POLICY: RetryPolicyInput = Object.freeze({
  maxAttempts: MAX_ATTEMPTS_LIMIT,
  backoff: Object.freeze({ initialMs: 0, multiplier: 1, maxMs: 0, jitter: 0 }),
  nonRetryable: [],
});

export type Refusal = { readonly ok: false; readonly code: ErrorCode; readonly message: string };

export interface SubmitInput {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: JsonValue;
  readonly priority?: number | undefined;
  /** ISO 8601 time. Not with `delayMs`. */
  readonly runAt?: string | undefined;
  readonly delayMs?: number | undefined;
  readonly retry?: RetryPolicyInput | undefined;
  readonly retention?: TaskRetention | undefined;
}

export type SubmitOutcome = { readonly ok: true; readonly created: boolean; readonly task: TaskView } | Refusal;

export interface PurgeInput {
  readonly state: TerminalTaskState;
  readonly olderThanMs: number;
  readonly limit?: number | undefined;
}

function ownerView(owner: StoredOwner): OwnerView {
  const { sessionId, workerId, incarnation, attempt } = owner.record;
  return { sessionId, workerId, incarnation, attempt, token: formatToken(owner.token) };
}

/** An ended attempt as the API shows it (the session that held it is the coordinator's to know). */
function attemptView(attempt: AttemptRecord): AttemptView {
  const { sessionId: _session, ...view } = attempt;
  return view;
}

/**
 * The admin view of a record; `owner` when the task is leased (its owner key names this task);
 * `detail` (payload and history, read on demand) for `GET /v1/tasks/:taskId` only.
 */
export function taskView(
  task: TaskRecord,
  owner: StoredOwner | undefined,
  nowMs: number,
  ctx: Pick<ServiceContext, 'config'>,
  detail?: { readonly payload: JsonValue | undefined; readonly history: readonly AttemptRecord[] },
): TaskView {
  const leased = task.state === 'pending' && owner?.record.taskId === task.taskId;
  return {
    taskId: task.taskId,
    resource: task.resource,
    ...(detail?.payload === undefined ? {} : { payload: detail.payload }),
    payloadBytes: task.payloadBytes,
    state: viewState(task, leased, nowMs),
    attempts: task.attempts,
    priority: task.priority ?? 0,
    retry: policyOf(task, ctx.config.retryPolicy),
    ...(task.notBeforeMs === undefined ? {} : { notBeforeMs: task.notBeforeMs }),
    lastEvent: lastEventOf(task),
    ...(task.lastError === undefined ? {} : { lastError: task.lastError }),
    ...(detail === undefined ? {} : { history: detail.history.map(attemptView) }),
    ...(task.last === undefined ? {} : { lastAttempt: attemptView(task.last) }),
    ...(task.retention === undefined ? {} : { retention: task.retention }),
    ...(task.createdAtMs === undefined ? {} : { createdAtMs: task.createdAtMs }),
    ...(task.endedAtMs === undefined ? {} : { endedAtMs: task.endedAtMs }),
    ...(task.result === undefined ? {} : { result: task.result }),
    ...(leased ? { owner: ownerView(owner) } : {}),
  };
}

/** A list page ends at its `limit` or at about this many bytes of views, whichever comes first. */
export const LIST_RESPONSE_BYTES = 4 * 1024 * 1024;

/** A fence advance is idempotent: retried by one policy (4 more attempts, 100 ms doubling). */
const advanceRetry = retryPolicy(handleAll, { maxAttempts: 4, backoff: new ExponentialBackoff({ initialDelay: 100 }) });

export class TaskService {
  readonly #ctx: ServiceContext;
  readonly #sessions: SessionManager;

  constructor(ctx: ServiceContext, sessions: SessionManager) {
    this.#ctx = ctx;
    this.#sessions = sessions;
  }

  async submit(input: SubmitInput): Promise<SubmitOutcome> {
    const [outcome] = await this.submitMany([input]);
    if (outcome === undefined) throw new CoordinatorError('INTERNAL', 'submit returned no outcome');
    return outcome;
  }

  /**
   * Many submits, each with the meaning of {@link submit} (idempotent by task id, CONFLICT on another
   * definition), in as few txns as etcd allows (up to 128 tasks or ~1 MB each, run concurrently).
   * A task id repeated in the batch is settled against its first occurrence. Outcomes in order.
   */
  async submitMany(inputs: readonly SubmitInput[]): Promise<SubmitOutcome[]> {
    // One `leasehold.task.submit` span per task (children of the caller's traceparent, if any);
    // a new task's record keeps its traceparent, so every grant of the task continues this trace.
    const spans = inputs.map((input) =>
      tracer.startSpan('leasehold.task.submit', {
        attributes: { [Attr.TASK_ID]: input.taskId, [Attr.RESOURCE]: input.resource },
      }),
    );
    try {
      const outcomes = await this.#submitMany(inputs, spans);
      outcomes.forEach((res, i) => {
        const span = spans[i];
        if (span === undefined) return;
        if (res.ok) span.setAttribute(Attr.OUTCOME, res.created ? 'created' : 'exists');
        else markRefused(span, res.code, res.message);
      });
      return outcomes;
    } catch (err) {
      for (const span of spans) markRefused(span, 'UNAVAILABLE', String(err));
      throw err;
    } finally {
      for (const span of spans) span.end();
    }
  }

  async #submitMany(inputs: readonly SubmitInput[], spans: readonly Span[]): Promise<SubmitOutcome[]> {
    const out: (SubmitOutcome | undefined)[] = inputs.map(() => undefined);
    const first = new Map<string, number>();
    const nowMs = this.#ctx.wallClock();
    const { maxSubmitsPerCall, maxSubmitBytesPerCall } = this.#ctx.store.limits;
    const prepared: { index: number; task: NewTask }[] = [];
    // First every task is made and measured: one too large refuses the whole call, before any write.
    for (const [index, input] of inputs.entries()) {
      if (first.has(input.taskId)) continue;
      first.set(input.taskId, index);
      const notBeforeMs = this.#notBefore(input, nowMs);
      if (typeof notBeforeMs === 'object') {
        out[index] = notBeforeMs;
        continue;
      }
      const made = this.#newTask(input, notBeforeMs, spans[index], nowMs);
      if (!made.ok) return inputs.map(() => made);
      prepared.push({ index, task: made.task });
    }
    const chunks: { index: number; task: NewTask }[][] = [];
    let chunk: { index: number; task: NewTask }[] = [];
    let bytes = 0;
    for (const job of prepared) {
      const size = job.task.payloadJson.length + encodeTask(job.task.record).length + 2 * job.task.record.taskId.length;
      if (chunk.length >= maxSubmitsPerCall || (chunk.length > 0 && bytes + size > maxSubmitBytesPerCall)) {
        chunks.push(chunk);
        chunk = [];
        bytes = 0;
      }
      chunk.push(job);
      bytes += size;
    }
    if (chunk.length > 0) chunks.push(chunk);
    await Promise.all(
      chunks.map(async (jobs) => {
        let left = jobs;
        for (let attempt = 0; left.length > 0; attempt += 1) {
          if (attempt >= 5) throw new CoordinatorError('UNAVAILABLE', 'tasks kept changing; submit again');
          const res = await this.#ctx.store.submitTasks(left.map((j) => j.task));
          if (res.kind === 'created') {
            for (const j of left)
              out[j.index] = { ok: true, created: true, task: this.#viewOf(j.task.record, undefined) };
            return;
          }
          const absent: typeof left = [];
          await Promise.all(
            left.map(async (j, i) => {
              const existing = res.existing[i];
              if (existing === undefined) absent.push(j);
              else out[j.index] = await this.#settleExisting(j.task.record, existing);
            }),
          );
          left = absent;
        }
      }),
    );
    return inputs.map((input, index): SubmitOutcome => {
      const firstIndex = first.get(input.taskId) ?? index;
      const settled = out[firstIndex];
      const original = inputs[firstIndex];
      if (settled === undefined || original === undefined) {
        throw new CoordinatorError('INTERNAL', `task ${input.taskId} was not settled`);
      }
      if (index === firstIndex) return settled;
      // A repeat in the same batch: the first occurrence decided; same definition → the same task.
      if (original.resource !== input.resource || payloadDigest(original.payload) !== payloadDigest(input.payload)) {
        return { ok: false, code: 'CONFLICT', message: `task ${input.taskId} exists with a different definition` };
      }
      return settled.ok ? { ok: true, created: false, task: settled.task } : settled;
    });
  }

  /** The task a submit creates (record and payload), or the refusal of a payload or record too large. */
  #newTask(
    input: SubmitInput,
    notBeforeMs: number | undefined,
    span: Span | undefined,
    nowMs: number,
  ): { readonly ok: true; readonly task: NewTask } | Refusal {
    const payloadJson = JSON.stringify(input.payload);
    const payloadBytes = utf8Bytes(payloadJson);
    const maxBytes = this.#ctx.config.maxTaskPayloadBytes;
    if (payloadBytes > maxBytes) {
      return {
        ok: false,
        code: 'PAYLOAD_TOO_LARGE',
        message:
          `task ${input.taskId}: payload of ${payloadBytes} bytes, over MAX_TASK_PAYLOAD_BYTES (${maxBytes}); ` +
          'pass large inputs by reference (a URL or object-store key in the payload)',
      };
    }
    // TEST ONLY (refused without LEASEHOLD_ALLOW_SABOTAGE=1): the broken lifecycle the chaos
    // checker must catch — the submitted retry policy ignored, unlimited attempts without backoff.
    const retry = this.#ctx.config.testSabotage === 'ignore-retry-policy' ? IGNORED_RETRY_POLICY : input.retry;
    const traceparent = span === undefined ? undefined : traceparentOf(span);
    const record = newTask(
      {
        taskId: input.taskId,
        resource: input.resource,
        payloadBytes,
        payloadDigest: payloadDigest(input.payload),
        priority: input.priority,
        notBeforeMs,
        retry,
        traceparent,
        retention: input.retention,
      },
      { nowMs, defaults: this.#ctx.config.retryPolicy },
    );
    const recordBytes = utf8Bytes(encodeTask(record));
    if (recordBytes > MAX_TASK_RECORD_BYTES - RECORD_GROWTH_BYTES) {
      return {
        ok: false,
        code: 'PAYLOAD_TOO_LARGE',
        message: `task ${input.taskId}: its record would take ${recordBytes} bytes (at most ${MAX_TASK_RECORD_BYTES - RECORD_GROWTH_BYTES}): fewer or shorter retry.nonRetryable names`,
      };
    }
    return { ok: true, task: { record, payloadJson } };
  }

  async #settleExisting(record: TaskRecord, existing: StoredTask | 'unreadable'): Promise<SubmitOutcome> {
    if (existing === 'unreadable') {
      return { ok: false, code: 'CONFLICT', message: 'task id exists with an unreadable record' };
    }
    if (!sameDefinition(existing, record.resource, record.payloadDigest)) {
      return { ok: false, code: 'CONFLICT', message: `task ${record.taskId} exists with a different definition` };
    }
    return { ok: true, created: false, task: await this.#view(existing) };
  }

  /** One task with its payload and history (read on demand, at one revision). */
  async get(taskId: string): Promise<TaskView | undefined> {
    const detail = await this.#ctx.store.taskDetail(taskId);
    if (detail === undefined) return undefined;
    const { task } = detail;
    const owner = task.record.state === 'pending' ? await this.#ctx.store.owner(task.record.resource) : undefined;
    return taskView(task.record, owner, this.#ctx.wallClock(), this.#ctx, detail);
  }

  /** Tasks in id order after `after`; `state` filters (leased is judged from the index). */
  async list(options: {
    state?: TaskStateName;
    limit: number;
    after?: string;
  }): Promise<{ tasks: TaskView[]; next: string | null }> {
    const out: TaskView[] = [];
    let after = options.after;
    let bytes = 0;
    const nowMs = this.#ctx.wallClock();
    for (let page = 0; page < 50 && out.length < options.limit; page += 1) {
      const { tasks, more } = await this.#ctx.store.taskPage(after, Math.max(options.limit, 100));
      for (const t of tasks) {
        after = t.record.taskId;
        const hint = this.#ctx.index.ownerOf(t.record.resource);
        const leased = t.record.state === 'pending' && hint?.taskId === t.record.taskId;
        const state = viewState(t.record, leased, nowMs);
        if (options.state !== undefined && state !== options.state) continue;
        out.push({ ...taskView(t.record, undefined, nowMs, this.#ctx), state });
        // A view is about the size of its stored record: the page ends at the count or the bytes.
        bytes += t.value.length;
        if (out.length >= options.limit || bytes >= LIST_RESPONSE_BYTES) {
          return { tasks: out, next: more || t !== tasks.at(-1) ? after : null };
        }
      }
      if (!more) return { tasks: out, next: null };
    }
    return { tasks: out, next: after ?? null };
  }

  /**
   * Cancel: the task ends `cancelled`; a held lease is revoked (owner key deleted, the holder pushed
   * `lease.revoked`) and the sink's fence is advanced to the cancel revision before the reply, so
   * once this returns the holder's late write is refused. When that advance fails, the reply is
   * UNAVAILABLE and a repeated cancel advances it again (idempotent).
   */
  async cancel(taskId: string): Promise<{ ok: true; task: TaskView } | Refusal> {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const task = await this.#ctx.store.task(taskId);
      if (task === undefined) return { ok: false, code: 'NOT_FOUND', message: `no task ${taskId}` };
      if (task.record.state === 'cancelled') {
        // A repeat: make sure the fence moved past the cancelled attempt.
        const last = task.record.last;
        if (last?.outcome === 'cancelled') await this.#fenceAfterCancel(task.record, task.modRevision);
        return { ok: true, task: this.#viewOf(task.record, undefined) };
      }
      if (task.record.state === 'completed' || task.record.state === 'failed') {
        return { ok: false, code: 'CONFLICT', message: `task ${taskId} is already ${task.record.state}` };
      }
      const owner = await this.#ctx.store.owner(task.record.resource);
      const holder = owner?.record.taskId === taskId ? owner : undefined;
      // A lost attempt nobody recorded yet (the owner key is gone) is closed by the cancel too.
      const openToken = task.record.open === undefined ? undefined : (holder?.token ?? task.modRevision);
      const next = cancelled(task.record, openToken, this.#ctx.wallClock());
      const res = await this.#ctx.store.cancelTask({
        task: task.record,
        taskModRevision: task.modRevision,
        next,
        legacy: task.legacy,
        owner:
          holder === undefined
            ? undefined
            : { sessionId: holder.record.sessionId, token: holder.token, requestId: holder.record.requestId },
      });
      if (res.kind === 'cancelled') {
        this.#ctx.metrics.lifecycle.inc({ change: 'cancel', outcome: holder === undefined ? 'idle' : 'revoked' });
        this.#ctx.log.info(
          { taskId, token: holder === undefined ? undefined : formatToken(holder.token) },
          'task cancelled',
        );
        if (openToken !== undefined) await this.#fenceAfterCancel(next, res.revision);
        return { ok: true, task: this.#viewOf(next, undefined) };
      }
    }
    throw new CoordinatorError('UNAVAILABLE', `task ${taskId} kept changing; cancel again`);
  }

  /** Advance the sink's fence of the cancelled task's resource to the cancel revision (retried). */
  async #fenceAfterCancel(task: TaskRecord, revision: bigint): Promise<void> {
    try {
      await advanceRetry.execute(async () => {
        const res = await this.#ctx.fences.submit({ resource: task.resource, token: revision });
        // Not ok: the fence is already past the cancel revision (a later grant): nothing to do.
        if (!res.ok) this.#ctx.log.debug({ taskId: task.taskId }, 'fence already past the cancel');
      });
    } catch (err) {
      this.#ctx.log.warn({ err, taskId: task.taskId }, 'cancelled, but the fence could not be advanced');
      throw new CoordinatorError(
        'UNAVAILABLE',
        `task ${task.taskId} is cancelled, but the sink's fence could not be advanced: the holder's late write ` +
          'may still land; cancel again to retry the advance',
        { cause: err },
      );
    }
  }

  /** Failed -> pending with a fresh attempt budget. */
  async retry(taskId: string): Promise<{ ok: true; task: TaskView } | Refusal> {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const task = await this.#ctx.store.task(taskId);
      if (task === undefined) return { ok: false, code: 'NOT_FOUND', message: `no task ${taskId}` };
      if (task.record.state !== 'failed') {
        const state = viewState(task.record, false, this.#ctx.wallClock());
        return { ok: false, code: 'CONFLICT', message: `task ${taskId} is ${state}, not failed` };
      }
      const next = retried(task.record, this.#ctx.wallClock());
      const res = await this.#ctx.store.retryTask({ modRevision: task.modRevision, next, legacy: task.legacy });
      if (res.kind === 'rewritten') {
        this.#ctx.metrics.lifecycle.inc({ change: 'retry', outcome: 'done' });
        this.#ctx.log.info({ taskId }, 'failed task retried');
        return { ok: true, task: this.#viewOf(next, undefined) };
      }
    }
    throw new CoordinatorError('UNAVAILABLE', `task ${taskId} kept changing; retry again`);
  }

  /**
   * Delete ended tasks of `state` that ended at least `olderThanMs` ago — record, payload and
   * history — oldest first, up to `limit` per call; `more` says whether to call again. The
   * candidates come from the index's ended tasks (nothing is scanned); each delete compares the
   * record's mod_revision as the index saw it, so a task retried since stays.
   */
  async purge(input: PurgeInput): Promise<{ purged: number; more: boolean }> {
    const limit = input.limit ?? 1_000;
    const cutoff = this.#ctx.wallClock() - input.olderThanMs;
    const candidates: { taskId: string; modRevision: bigint; endedAtMs: number }[] = [];
    for (const t of this.#ctx.index.endedTasks()) {
      if (t.state === input.state && t.endedAtMs <= cutoff) candidates.push(t);
    }
    candidates.sort((a, b) => a.endedAtMs - b.endedAtMs || (a.taskId < b.taskId ? -1 : 1));
    const refs = candidates.slice(0, limit).map((t) => ({ taskId: t.taskId, modRevision: t.modRevision }));
    const purged = refs.length === 0 ? 0 : (await this.#ctx.store.purgeTasks(refs)).length;
    this.#ctx.metrics.lifecycle.inc({ change: 'purge', outcome: 'done' }, purged);
    if (purged > 0) this.#ctx.log.info({ state: input.state, purged, olderThanMs: input.olderThanMs }, 'tasks purged');
    return { purged, more: candidates.length > refs.length };
  }

  /** `delayMs` / `runAt` -> notBeforeMs (undefined: at once), or a refusal. */
  #notBefore(input: SubmitInput, nowMs: number): number | undefined | Refusal {
    if (input.runAt !== undefined && input.delayMs !== undefined) {
      return { ok: false, code: 'INVALID_MESSAGE', message: 'give runAt or delayMs, not both' };
    }
    if (input.delayMs !== undefined) return input.delayMs === 0 ? undefined : nowMs + input.delayMs;
    if (input.runAt === undefined) return undefined;
    const at = Date.parse(input.runAt);
    if (!Number.isFinite(at)) return { ok: false, code: 'INVALID_MESSAGE', message: 'runAt: not a time' };
    if (at - nowMs > MAX_DELAY_MS) {
      return { ok: false, code: 'INVALID_MESSAGE', message: `runAt: more than ${MAX_DELAY_MS} ms ahead` };
    }
    return at <= nowMs ? undefined : at;
  }

  #viewOf(record: TaskRecord, owner: StoredOwner | undefined): TaskView {
    return taskView(record, owner, this.#ctx.wallClock(), this.#ctx);
  }

  async resource(resource: string): Promise<ResourceOwnerView> {
    const owner = await this.#ctx.store.owner(resource);
    if (owner === undefined) return { resource, owner: null, token: null, remainingMs: null };
    const session = await this.#ctx.store.session(owner.record.sessionId);
    const local = this.#sessions.get(owner.record.sessionId);
    return {
      resource,
      owner: { ...ownerView(owner), taskId: owner.record.taskId, coordinatorId: session?.record.coordinatorId ?? null },
      token: formatToken(owner.token),
      remainingMs: local === undefined ? null : Math.floor(this.#sessions.remainingMs(local)),
    };
  }

  async #view(task: StoredTask): Promise<TaskView> {
    const owner = task.record.state === 'pending' ? await this.#ctx.store.owner(task.record.resource) : undefined;
    return this.#viewOf(task.record, owner);
  }
}
