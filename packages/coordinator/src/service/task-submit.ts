/**
 * Submits: idempotent by task id, CONFLICT on another definition, in as few txns as etcd allows.
 * The decisions (schedule, sizes, chunks, repeats) are core/submit-plan.ts; this shell makes the
 * records, runs the txns and settles what already existed.
 */
import { DEFAULT_QUEUE } from '@leasehold/protocol';
import type { Span } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { newTask } from '../core/lifecycle.js';
import {
  notBeforeOf,
  payloadRefusal,
  recordRefusal,
  repeatOutcome,
  submitChunks,
  type Definition,
  type Refusal,
  type SubmitInput,
  type SubmitOutcome,
} from '../core/submit-plan.js';
import { taskView } from '../core/task-view.js';
import { encodeTask, queueOf, sameDefinition, utf8Bytes, type TaskRecord } from '../core/task-record.js';
import { CoordinatorError } from '../errors.js';
import { payloadDigest } from '../payload-digest.js';
import type { LeaseStore, NewTask, StoredOwner, StoredTask } from '../store/port.js';
import { Attr, markRefused, traceparentOf, tracer } from './tracing.js';

/**
 * The retry policy a submitted task is stored with, given its submit. Default
 * ({@link submittedRetryPolicy}): the one it was submitted with, what it leaves out taking the
 * installation's defaults. A dependency-injection seam (`CoordinatorDeps.retryPolicyOf`): an
 * embedding may clamp or replace what submitters ask for. It is stored in the task record, so a
 * repeated submit is compared with the policy this returned.
 */
export type RetryPolicyOf = (input: SubmitInput) => SubmitInput['retry'];

export const submittedRetryPolicy: RetryPolicyOf = (input) => input.retry;

/** What submitting uses. */
export interface SubmitContext {
  readonly config: Pick<CoordinatorConfig, 'maxTaskPayloadBytes' | 'retryPolicy'>;
  readonly wallClock: () => number;
  /** Default {@link submittedRetryPolicy}. */
  readonly retryPolicyOf?: RetryPolicyOf;
  readonly log: Logger;
  readonly store: Pick<LeaseStore, 'limits' | 'submitTasks' | 'owner'>;
}

interface Job {
  readonly index: number;
  readonly task: NewTask;
  readonly bytes: number;
}

export class TaskSubmitter {
  readonly #ctx: SubmitContext;

  constructor(ctx: SubmitContext) {
    this.#ctx = ctx;
  }

  /**
   * Many submits, each idempotent by task id (CONFLICT on another definition), in as few txns as
   * etcd allows (up to 128 tasks or ~1 MB each, run concurrently). A task id repeated in the batch
   * is settled against its first occurrence. Outcomes in order.
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
    const prepared: Job[] = [];
    // First every task is made and measured: one too large refuses the whole call, before any write.
    for (const [index, input] of inputs.entries()) {
      if (first.has(input.taskId)) continue;
      first.set(input.taskId, index);
      const notBeforeMs = notBeforeOf(input, nowMs);
      if (typeof notBeforeMs === 'object') {
        out[index] = notBeforeMs;
        continue;
      }
      const made = this.#newTask(input, notBeforeMs, spans[index], nowMs);
      if (!made.ok) return inputs.map(() => made);
      const { task } = made;
      const bytes = task.payloadJson.length + encodeTask(task.record).length + 2 * task.record.taskId.length;
      prepared.push({ index, task, bytes });
    }
    await Promise.all(
      submitChunks(prepared, maxSubmitsPerCall, maxSubmitBytesPerCall).map(async (jobs) => {
        let left = jobs;
        for (let attempt = 0; left.length > 0; attempt += 1) {
          if (attempt >= 5) throw new CoordinatorError('UNAVAILABLE', 'tasks kept changing; submit again');
          const res = await this.#ctx.store.submitTasks(left.map((j) => j.task));
          if (res.kind === 'created') {
            for (const j of left) {
              out[j.index] = { ok: true, created: true, task: this.#viewOf(j.task.record, undefined) };
            }
            return;
          }
          const absent: Job[] = [];
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
      return repeatOutcome(input.taskId, definitionOf(original), definitionOf(input), settled);
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
    const tooLarge = payloadRefusal(input.taskId, payloadBytes, this.#ctx.config.maxTaskPayloadBytes);
    if (tooLarge !== undefined) return tooLarge;
    const retry = (this.#ctx.retryPolicyOf ?? submittedRetryPolicy)(input);
    const traceparent = span === undefined ? undefined : traceparentOf(span);
    const record = newTask(
      {
        taskId: input.taskId,
        resource: input.resource,
        queue: input.queue,
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
    const recordTooLarge = recordRefusal(input.taskId, utf8Bytes(encodeTask(record)));
    if (recordTooLarge !== undefined) return recordTooLarge;
    return { ok: true, task: { record, payloadJson } };
  }

  async #settleExisting(record: TaskRecord, existing: StoredTask | 'unreadable'): Promise<SubmitOutcome> {
    if (existing === 'unreadable') {
      return { ok: false, code: 'CONFLICT', message: 'task id exists with an unreadable record' };
    }
    if (!sameDefinition(existing, record.resource, queueOf(record), record.payloadDigest)) {
      return { ok: false, code: 'CONFLICT', message: `task ${record.taskId} exists with a different definition` };
    }
    const owner =
      existing.record.state === 'pending' ? await this.#ctx.store.owner(existing.record.resource) : undefined;
    return { ok: true, created: false, task: this.#viewOf(existing.record, owner) };
  }

  #viewOf(record: TaskRecord, owner: StoredOwner | undefined) {
    return taskView(record, owner, this.#ctx.wallClock(), this.#ctx.config.retryPolicy);
  }
}

function definitionOf(input: SubmitInput): Definition {
  return { resource: input.resource, queue: input.queue ?? DEFAULT_QUEUE, payloadDigest: payloadDigest(input.payload) };
}
