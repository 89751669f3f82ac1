/**
 * The pure decisions of a submit (the shell is `service/task-submit.ts`): when a task may first be
 * granted, which payloads and records are too large, how a batch is cut into txns, and what a
 * task id repeated within one batch is answered. Table-tested in submit-plan.test.ts.
 */
import { MAX_DELAY_MS, type ErrorCode, type JsonValue, type TaskView } from '@leasehold/protocol';
import { chunksBy } from './chunks.js';
import type { SubmitSpec } from './lifecycle.js';
import { MAX_TASK_RECORD_BYTES, RECORD_GROWTH_BYTES } from './task-record.js';

export type Refusal = { readonly ok: false; readonly code: ErrorCode; readonly message: string };

/** A submit as the API takes it (the lifecycle's {@link SubmitSpec} is computed from it). */
export interface SubmitInput extends Pick<
  SubmitSpec,
  'taskId' | 'resource' | 'queue' | 'priority' | 'retry' | 'retention'
> {
  readonly payload: JsonValue;
  /** ISO 8601 time. Not with `delayMs`. */
  readonly runAt?: string | undefined;
  readonly delayMs?: number | undefined;
}

export type SubmitOutcome = { readonly ok: true; readonly created: boolean; readonly task: TaskView } | Refusal;

/** `delayMs` / `runAt` -> notBeforeMs (undefined: at once), or a refusal. */
export function notBeforeOf(
  input: Pick<SubmitInput, 'runAt' | 'delayMs'>,
  nowMs: number,
): number | undefined | Refusal {
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

/** A payload over MAX_TASK_PAYLOAD_BYTES is refused (413): large inputs go by reference. */
export function payloadRefusal(taskId: string, payloadBytes: number, maxBytes: number): Refusal | undefined {
  if (payloadBytes <= maxBytes) return undefined;
  return {
    ok: false,
    code: 'PAYLOAD_TOO_LARGE',
    message:
      `task ${taskId}: payload of ${payloadBytes} bytes, over MAX_TASK_PAYLOAD_BYTES (${maxBytes}); ` +
      'pass large inputs by reference (a URL or object-store key in the payload)',
  };
}

/** A record that would leave no room for its attempts to grow is refused (413). */
export function recordRefusal(taskId: string, recordBytes: number): Refusal | undefined {
  const max = MAX_TASK_RECORD_BYTES - RECORD_GROWTH_BYTES;
  if (recordBytes <= max) return undefined;
  return {
    ok: false,
    code: 'PAYLOAD_TOO_LARGE',
    message: `task ${taskId}: its record would take ${recordBytes} bytes (at most ${max}): fewer or shorter retry.nonRetryable names`,
  };
}

/** A task to create, measured: what one submit txn carries of it. */
export interface SizedJob {
  /** Bytes the txn carries for it (payload, record, keys). */
  readonly bytes: number;
}

/** Consecutive txns of at most `maxCount` tasks and about `maxBytes` each. */
export function submitChunks<J extends SizedJob>(jobs: readonly J[], maxCount: number, maxBytes: number): J[][] {
  return chunksBy(jobs, maxCount, maxBytes, (job) => job.bytes);
}

/** The definition a repeated submit is compared by. */
export interface Definition {
  readonly resource: string;
  /** The queue (`default` when the submit named none). */
  readonly queue: string;
  readonly payloadDigest: string;
}

/**
 * A task id repeated in one batch: the first occurrence decided. The same definition is the same
 * task (`created: false`); another is a CONFLICT.
 */
export function repeatOutcome(
  taskId: string,
  first: Definition,
  repeat: Definition,
  settled: SubmitOutcome,
): SubmitOutcome {
  if (
    first.resource !== repeat.resource ||
    first.queue !== repeat.queue ||
    first.payloadDigest !== repeat.payloadDigest
  ) {
    return { ok: false, code: 'CONFLICT', message: `task ${taskId} exists with a different definition` };
  }
  return settled.ok ? { ok: true, created: false, task: settled.task } : settled;
}
