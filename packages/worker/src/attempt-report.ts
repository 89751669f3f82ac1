/**
 * The end of an attempt, told to the coordinator: `task.complete` (with the result id),
 * `task.fail` (the handler's error) or `lease.release` (given back). Retried with the one backoff
 * while the answer is a retryable error or none came; an old coordinator without `task.fail`
 * (`INVALID_MESSAGE`) gets a release instead. What the coordinator answered goes back to the
 * caller as data.
 */
import {
  backoffDelayMs,
  LeaseholdError,
  type BackoffOptions,
  type CoordinatorMessage,
  type TaskFailure,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { SlotNext } from './acquire.js';
import type { CompleteRequest, NextAcquire, WorkerRequest } from './connection.js';
import { delay } from './delay.js';

/** The holder's proof on every end-of-attempt frame. */
export interface HeldLease {
  readonly resource: string;
  readonly token: string;
  readonly incarnation: string;
  readonly traceparent?: string;
}

export type AttemptEnd =
  | { readonly kind: 'complete'; readonly taskId: string; readonly resultId: string; readonly noResult?: boolean }
  | { readonly kind: 'fail'; readonly taskId: string; readonly failure: TaskFailure }
  | { readonly kind: 'release'; readonly reason: string };

export type ReportOutcome =
  | { readonly kind: 'completed' }
  | { readonly kind: 'failed'; readonly outcome: 'retrying' | 'failed'; readonly notBeforeMs?: number }
  | { readonly kind: 'released' }
  /** The coordinator refused (e.g. NOT_HOLDER: the lease is gone), or no answer after every attempt. */
  | { readonly kind: 'refused'; readonly code: string };

export interface ReportDeps {
  readonly request: (message: WorkerRequest) => Promise<CoordinatorMessage>;
  /**
   * A `task.complete` carrying the slot's next acquire (session.requestCarrying): `carried` is
   * called when it was carried. Absent: completions carry nothing.
   */
  readonly requestCarrying?: (
    message: CompleteRequest,
    next: NextAcquire,
    carried: (reply: Promise<CoordinatorMessage>, sentAtMs: number) => void,
  ) => Promise<CoordinatorMessage>;
  readonly log: Logger;
  readonly attempts: number;
  readonly backoff: BackoffOptions;
  readonly random: () => number;
  /** Aborts the waits between retries (the worker's force time ran out). */
  readonly signal?: AbortSignal;
}

function frameOf(end: AttemptEnd, held: HeldLease): WorkerRequest {
  switch (end.kind) {
    case 'complete':
      return {
        type: 'task.complete',
        taskId: end.taskId,
        resultId: end.resultId,
        ...(end.noResult === true ? { noResult: true as const } : {}),
        ...held,
      };
    case 'fail':
      return { type: 'task.fail', taskId: end.taskId, ...held, error: end.failure };
    case 'release':
      return { type: 'lease.release', ...held, reason: end.reason.slice(0, 500) };
  }
}

/**
 * The first `task.complete` carries the slot's next acquire when the slot goes on (`next.wanted()`)
 * and the session can send one; a retry never does (the carried acquire, if it went, is retried by
 * the slot with its request id).
 */
function send(deps: ReportDeps, frame: WorkerRequest, next: SlotNext | undefined): Promise<CoordinatorMessage> {
  if (frame.type !== 'task.complete' || next === undefined || deps.requestCarrying === undefined || !next.wanted())
    return deps.request(frame);
  return deps.requestCarrying(frame, next.acquire, (reply, sentAtMs) => {
    next.carried = { reply, sentAtMs };
  });
}

export async function reportAttemptEnd(
  deps: ReportDeps,
  held: HeldLease,
  first: AttemptEnd,
  next?: SlotNext,
): Promise<ReportOutcome> {
  let end = first;
  let lastCode = 'UNAVAILABLE';
  for (let attempt = 0; attempt < deps.attempts; attempt++) {
    try {
      const reply = await send(deps, frameOf(end, held), attempt === 0 ? next : undefined);
      switch (reply.type) {
        case 'task.completed':
          return { kind: 'completed' };
        case 'task.failed':
          return {
            kind: 'failed',
            outcome: reply.outcome,
            ...(reply.notBeforeMs === undefined ? {} : { notBeforeMs: reply.notBeforeMs }),
          };
        case 'lease.released':
          return { kind: 'released' };
        case 'error':
          if (end.kind === 'fail' && reply.code === 'INVALID_MESSAGE') {
            // A coordinator older than task.fail: give the lease back instead.
            end = { kind: 'release', reason: end.failure.message };
            continue;
          }
          deps.log.warn({ code: reply.code }, `${end.kind} refused`);
          if (!reply.retryable) return { kind: 'refused', code: reply.code };
          lastCode = reply.code;
          break;
        default:
          deps.log.warn({ type: reply.type }, `unexpected answer to ${end.kind}`);
          return { kind: 'refused', code: 'INVALID_MESSAGE' };
      }
    } catch (err) {
      if (!(err instanceof LeaseholdError) || !err.retryable) {
        deps.log.warn({ err }, `${end.kind} not sent`);
        return { kind: 'refused', code: err instanceof LeaseholdError ? err.code : 'INTERNAL' };
      }
      lastCode = err.code;
    }
    if (!(await delay(backoffDelayMs(attempt, deps.backoff, deps.random), deps.signal))) break;
  }
  deps.log.warn({ code: lastCode, attempts: deps.attempts }, `${end.kind} not acknowledged; giving up`);
  return { kind: 'refused', code: lastCode };
}
