/**
 * The task API behind HTTP: submit (idempotent by task id; task-submit.ts), read, list, cancel,
 * retry, purge, and the view of a resource's current owner. Refusals (NOT_FOUND, CONFLICT,
 * INVALID_MESSAGE) are returned as data.
 */
import {
  formatToken,
  type ResourceOwnerView,
  type TaskStateName,
  type TaskView,
  type TerminalTaskState,
} from '@leasehold/protocol';
import { ExponentialBackoff, handleAll, retry as retryPolicy } from 'cockatiel';
import { cancelled, retried, viewState } from '../core/lifecycle.js';
import { forgetPurged, planPurge } from '../core/retention.js';
import type { Refusal, SubmitInput, SubmitOutcome } from '../core/submit-plan.js';
import type { TaskIndex } from '../core/task-index.js';
import { ownerView, taskView } from '../core/task-view.js';
import { queueOf, type TaskRecord } from '../core/task-record.js';
import { CoordinatorError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore, StoredOwner } from '../store/port.js';
import type { FenceAdvances } from './context.js';
import type { SessionRegistry } from './local-session.js';
import { TaskSubmitter, type SubmitContext } from './task-submit.js';

export type { OwnerView, TaskView, ResourceOwnerView as ResourceView } from '@leasehold/protocol';
export type { Refusal, SubmitInput, SubmitOutcome } from '../core/submit-plan.js';

/** What the task API uses. */
export interface TasksContext extends SubmitContext {
  readonly store: Pick<
    LeaseStore,
    | 'limits'
    | 'submitTasks'
    | 'owner'
    | 'session'
    | 'task'
    | 'taskDetail'
    | 'taskPage'
    | 'cancelTask'
    | 'retryTask'
    | 'purgeTasks'
  >;
  readonly index: Pick<TaskIndex, 'ownerOf' | 'endedTasks' | 'applyOwnDelete'>;
  readonly metrics: Pick<Metrics, 'lifecycle'>;
  readonly fences: FenceAdvances;
}

export interface PurgeInput {
  readonly state: TerminalTaskState;
  readonly olderThanMs: number;
  readonly limit?: number | undefined;
}

/** A list page ends at its `limit` or at about this many bytes of views, whichever comes first. */
export const LIST_RESPONSE_BYTES = 4 * 1024 * 1024;

/** A fence advance is idempotent: retried by one policy (4 more attempts, 100 ms doubling). */
const advanceRetry = retryPolicy(handleAll, { maxAttempts: 4, backoff: new ExponentialBackoff({ initialDelay: 100 }) });

export class TaskService {
  readonly #ctx: TasksContext;
  readonly #sessions: Pick<SessionRegistry, 'get' | 'remainingMs'>;
  readonly #submitter: TaskSubmitter;

  constructor(ctx: TasksContext, sessions: Pick<SessionRegistry, 'get' | 'remainingMs'>) {
    this.#ctx = ctx;
    this.#sessions = sessions;
    this.#submitter = new TaskSubmitter(ctx);
  }

  async submit(input: SubmitInput): Promise<SubmitOutcome> {
    const [outcome] = await this.submitMany([input]);
    if (outcome === undefined) throw new CoordinatorError('INTERNAL', 'submit returned no outcome');
    return outcome;
  }

  /** See {@link TaskSubmitter.submitMany}. */
  submitMany(inputs: readonly SubmitInput[]): Promise<SubmitOutcome[]> {
    return this.#submitter.submitMany(inputs);
  }

  /** One task with its payload and history (read on demand, at one revision). */
  async get(taskId: string): Promise<TaskView | undefined> {
    const detail = await this.#ctx.store.taskDetail(taskId);
    if (detail === undefined) return undefined;
    const { task } = detail;
    const owner = task.record.state === 'pending' ? await this.#ctx.store.owner(task.record.resource) : undefined;
    return taskView(task.record, owner, this.#ctx.wallClock(), this.#ctx.config.retryPolicy, detail);
  }

  /** Tasks in id order after `after`; `state` and `queue` filter (leased is judged from the index). */
  async list(options: {
    state?: TaskStateName;
    queue?: string;
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
        if (options.queue !== undefined && queueOf(t.record) !== options.queue) continue;
        const hint = this.#ctx.index.ownerOf(t.record.resource);
        const leased = t.record.state === 'pending' && hint?.taskId === t.record.taskId;
        const state = viewState(t.record, leased, nowMs);
        if (options.state !== undefined && state !== options.state) continue;
        out.push({ ...taskView(t.record, undefined, nowMs, this.#ctx.config.retryPolicy), state });
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
   * candidates come from the index's ended tasks (nothing is scanned; core/retention.ts plans);
   * each delete compares the record's mod_revision as the index saw it, so a task retried since
   * stays.
   */
  async purge(input: PurgeInput): Promise<{ purged: number; more: boolean }> {
    const plan = planPurge(this.#ctx.index.endedTasks(), input, this.#ctx.wallClock());
    const gone = plan.refs.length === 0 ? [] : await this.#ctx.store.purgeTasks(plan.refs);
    // The index forgets them now: a next call (purgeAll's loop) must not plan them again before the
    // watch has delivered their deletes.
    forgetPurged(this.#ctx.index, plan.refs, gone);
    const purged = gone.length;
    this.#ctx.metrics.lifecycle.inc({ change: 'purge', outcome: 'done' }, purged);
    if (purged > 0) this.#ctx.log.info({ state: input.state, purged, olderThanMs: input.olderThanMs }, 'tasks purged');
    return { purged, more: plan.more };
  }

  #viewOf(record: TaskRecord, owner: StoredOwner | undefined): TaskView {
    return taskView(record, owner, this.#ctx.wallClock(), this.#ctx.config.retryPolicy);
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
}
