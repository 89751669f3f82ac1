/**
 * The task API behind HTTP: submit (idempotent by task id), read, list, cancel, and the view of a
 * resource's current owner. Refusals (NOT_FOUND, CONFLICT) are returned as data.
 */
import {
  formatToken,
  type ErrorCode,
  type JsonValue,
  type OwnerView,
  type ResourceOwnerView,
  type TaskView,
} from '@leasehold/protocol';
import { encodeRecord, sameDefinition, TaskState, type TaskRecord } from '../core/records.js';
import { CoordinatorError } from '../errors.js';
import type { StoredOwner, StoredTask } from '../store/port.js';
import type { ServiceContext } from './context.js';
import type { SessionManager } from './sessions.js';

export type { OwnerView, TaskView, ResourceOwnerView as ResourceView } from '@leasehold/protocol';

export type Refusal = { readonly ok: false; readonly code: ErrorCode; readonly message: string };

export interface SubmitInput {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: JsonValue;
}

export type SubmitOutcome = { readonly ok: true; readonly created: boolean; readonly task: TaskView } | Refusal;

function ownerView(owner: StoredOwner): OwnerView {
  const { sessionId, workerId, incarnation, attempt } = owner.record;
  return { sessionId, workerId, incarnation, attempt, token: formatToken(owner.token) };
}

function taskView(task: TaskRecord, owner: StoredOwner | undefined): TaskView {
  const leased = task.state === 'pending' && owner?.record.taskId === task.taskId;
  return {
    taskId: task.taskId,
    resource: task.resource,
    payload: task.payload,
    state: leased ? TaskState.LEASED : task.state,
    attempts: task.attempts,
    ...(task.result === undefined ? {} : { result: task.result }),
    ...(leased ? { owner: ownerView(owner) } : {}),
  };
}

export class TaskService {
  readonly #ctx: ServiceContext;
  readonly #sessions: SessionManager;

  constructor(ctx: ServiceContext, sessions: SessionManager) {
    this.#ctx = ctx;
    this.#sessions = sessions;
  }

  async submit(input: {
    taskId: string;
    resource: string;
    payload: JsonValue;
  }): Promise<{ ok: true; created: boolean; task: TaskView } | Refusal> {
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
    const out: (SubmitOutcome | undefined)[] = inputs.map(() => undefined);
    const first = new Map<string, number>();
    const { maxSubmitsPerCall, maxSubmitBytesPerCall } = this.#ctx.store.limits;
    const chunks: { index: number; record: TaskRecord }[][] = [];
    let chunk: { index: number; record: TaskRecord }[] = [];
    let bytes = 0;
    inputs.forEach((input, index) => {
      if (first.has(input.taskId)) return;
      first.set(input.taskId, index);
      const record: TaskRecord = { v: 1, ...input, state: 'pending', attempts: 0 };
      const size = encodeRecord(record).length + input.taskId.length;
      if (chunk.length >= maxSubmitsPerCall || (chunk.length > 0 && bytes + size > maxSubmitBytesPerCall)) {
        chunks.push(chunk);
        chunk = [];
        bytes = 0;
      }
      chunk.push({ index, record });
      bytes += size;
    });
    if (chunk.length > 0) chunks.push(chunk);
    await Promise.all(
      chunks.map(async (jobs) => {
        let left = jobs;
        for (let attempt = 0; left.length > 0; attempt += 1) {
          if (attempt >= 5) throw new CoordinatorError('UNAVAILABLE', 'tasks kept changing; submit again');
          const res = await this.#ctx.store.submitTasks(left.map((j) => j.record));
          if (res.kind === 'created') {
            for (const j of left) out[j.index] = { ok: true, created: true, task: taskView(j.record, undefined) };
            return;
          }
          const absent: typeof left = [];
          await Promise.all(
            left.map(async (j, i) => {
              const existing = res.existing[i];
              if (existing === undefined) absent.push(j);
              else out[j.index] = await this.#settleExisting(j.record, existing);
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
      if (!sameDefinition({ v: 1, ...original, state: 'pending', attempts: 0 }, input.resource, input.payload)) {
        return { ok: false, code: 'CONFLICT', message: `task ${input.taskId} exists with a different definition` };
      }
      return settled.ok ? { ok: true, created: false, task: settled.task } : settled;
    });
  }

  async #settleExisting(record: TaskRecord, existing: StoredTask | 'unreadable'): Promise<SubmitOutcome> {
    if (existing === 'unreadable') {
      return { ok: false, code: 'CONFLICT', message: 'task id exists with an unreadable record' };
    }
    if (!sameDefinition(existing.record, record.resource, record.payload)) {
      return { ok: false, code: 'CONFLICT', message: `task ${record.taskId} exists with a different definition` };
    }
    return { ok: true, created: false, task: await this.#view(existing) };
  }

  async get(taskId: string): Promise<TaskView | undefined> {
    const task = await this.#ctx.store.task(taskId);
    return task === undefined ? undefined : this.#view(task);
  }

  /** Tasks in id order after `after`; `state` filters (leased is judged from the index). */
  async list(options: {
    state?: TaskState;
    limit: number;
    after?: string;
  }): Promise<{ tasks: TaskView[]; next: string | null }> {
    const out: TaskView[] = [];
    let after = options.after;
    for (let page = 0; page < 50 && out.length < options.limit; page += 1) {
      const { tasks, more } = await this.#ctx.store.taskPage(after, Math.max(options.limit, 100));
      for (const t of tasks) {
        after = t.record.taskId;
        const hint = this.#ctx.index.ownerOf(t.record.resource);
        const leased = t.record.state === 'pending' && hint?.taskId === t.record.taskId;
        const state = leased ? TaskState.LEASED : t.record.state;
        if (options.state !== undefined && state !== options.state) continue;
        out.push({ ...taskView(t.record, undefined), state });
        if (out.length >= options.limit) return { tasks: out, next: more || t !== tasks.at(-1) ? after : null };
      }
      if (!more) return { tasks: out, next: null };
    }
    return { tasks: out, next: after ?? null };
  }

  async cancel(taskId: string): Promise<{ ok: true; task: TaskView } | Refusal> {
    for (let attempt = 0; attempt < 5; attempt += 1) {
      const task = await this.#ctx.store.task(taskId);
      if (task === undefined) return { ok: false, code: 'NOT_FOUND', message: `no task ${taskId}` };
      if (task.record.state === 'cancelled') return { ok: true, task: taskView(task.record, undefined) };
      if (task.record.state === 'completed') {
        return { ok: false, code: 'CONFLICT', message: `task ${taskId} is already completed` };
      }
      const owner = await this.#ctx.store.owner(task.record.resource);
      const holder = owner?.record.taskId === taskId ? owner : undefined;
      const res = await this.#ctx.store.cancelTask({
        task: task.record,
        taskModRevision: task.modRevision,
        owner:
          holder === undefined
            ? undefined
            : { sessionId: holder.record.sessionId, token: holder.token, requestId: holder.record.requestId },
      });
      if (res.kind === 'cancelled') {
        this.#ctx.log.info(
          { taskId, token: holder === undefined ? undefined : formatToken(holder.token) },
          'task cancelled',
        );
        return { ok: true, task: taskView({ ...task.record, state: 'cancelled' }, undefined) };
      }
    }
    throw new CoordinatorError('UNAVAILABLE', `task ${taskId} kept changing; cancel again`);
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
    return taskView(task.record, owner);
  }
}
