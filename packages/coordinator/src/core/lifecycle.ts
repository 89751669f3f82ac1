/**
 * The task lifecycle as pure functions: each takes the task record as read and returns the record
 * the transaction writes. No I/O, no clock of its own (`nowMs` is wall-clock epoch ms, given by the
 * caller, because `notBeforeMs` is stored and compared by every coordinator), no randomness of its
 * own (`random` is injected: jitter is reproducible in tests).
 *
 *   submit ──▶ pending ──grant──▶ leased ──complete──▶ completed
 *                 ▲                  │ fail / lease lost, attempts left ──▶ pending (delayed: backoff)
 *                 │                  │ fail / lease lost, none left, or non-retryable ──▶ failed
 *                 │                  │ release, abandoned grant ──▶ pending (attempt given back)
 *                 └──── retry ◀── failed            any non-terminal ──cancel──▶ cancelled
 *
 * An attempt is opened by the grant (which writes `open`) and closed, exactly once, by whichever
 * record comes next: the transaction that writes it compares the task key's mod_revision with the
 * grant's revision (= the attempt's token), so two closings of one attempt cannot both land.
 */
import {
  DEFAULT_QUEUE,
  resolveRetryPolicy,
  retryDelayMs,
  type AttemptOutcome,
  type RetryPolicy,
  type RetryPolicyInput,
  type TaskEventKind,
  type TaskRetention,
  type TaskStateName,
} from '@leasehold/protocol';
import { clipError, type AttemptRecord, type TaskRecord } from './task-record.js';

export interface LifecycleEnv {
  /** Wall-clock epoch ms. */
  readonly nowMs: number;
  /** [0, 1): backoff jitter. */
  readonly random: () => number;
  /** The installation's retry policy, for records written before policies were stored. */
  readonly defaults: RetryPolicy;
}

export interface FailureInfo {
  readonly name: string;
  readonly message: string;
  readonly retryable: boolean;
}

/** The error recorded for an attempt whose lease ended without a result. */
export const LEASE_LOST_ERROR = Object.freeze({
  name: 'LeaseExpired',
  message: 'the lease ended without a result (worker stopped, crashed, or lost its session)',
});

export interface SubmitSpec {
  readonly taskId: string;
  readonly resource: string;
  /** The queue; undefined: `default`. Stored only when it is not `default` (records stay as before). */
  readonly queue?: string | undefined;
  /** Bytes of the payload's JSON (stored under `inputs/<t>` by the submit txn). */
  readonly payloadBytes: number;
  /** sha256 of its canonical JSON: a repeated submit is compared by it. */
  readonly payloadDigest: string;
  readonly priority?: number | undefined;
  /** Epoch ms; undefined: grantable at once. */
  readonly notBeforeMs?: number | undefined;
  readonly retry?: RetryPolicyInput | undefined;
  /** The submit span's W3C trace context (tracing on): every grant of the task continues it. */
  readonly traceparent?: string | undefined;
  readonly retention?: TaskRetention | undefined;
}

export function policyOf(task: TaskRecord, defaults: RetryPolicy): RetryPolicy {
  return task.retry ?? defaults;
}

export function newTask(spec: SubmitSpec, env: Pick<LifecycleEnv, 'nowMs' | 'defaults'>): TaskRecord {
  return {
    v: 2,
    taskId: spec.taskId,
    resource: spec.resource,
    ...(spec.queue === undefined || spec.queue === DEFAULT_QUEUE ? {} : { queue: spec.queue }),
    payloadBytes: spec.payloadBytes,
    payloadDigest: spec.payloadDigest,
    state: 'pending',
    attempts: 0,
    priority: spec.priority ?? 0,
    retry: resolveRetryPolicy(env.defaults, spec.retry),
    ...(spec.notBeforeMs === undefined || spec.notBeforeMs <= env.nowMs ? {} : { notBeforeMs: spec.notBeforeMs }),
    lastEvent: 'submitted',
    atMs: env.nowMs,
    createdAtMs: env.nowMs,
    ...(spec.traceparent === undefined ? {} : { traceparent: spec.traceparent }),
    ...(spec.retention === undefined ? {} : { retention: spec.retention }),
  };
}

/** The record the grant txn writes: one more attempt, opened now. */
export function granted(
  task: TaskRecord,
  holder: { readonly workerId: string; readonly sessionId: string },
  nowMs: number,
): TaskRecord {
  const attempt = task.attempts + 1;
  const { notBeforeMs: _notBefore, ...rest } = task;
  return {
    ...rest,
    attempts: attempt,
    open: { attempt, workerId: holder.workerId, sessionId: holder.sessionId, startedAtMs: nowMs },
    lastEvent: 'granted',
    atMs: nowMs,
  };
}

/**
 * `task` without its open attempt, with the ended attempt as `last` and `endedAttempts` one more:
 * the txn that writes the result also puts it as history entry `endedAttempts` (and drops the
 * entry MAX_TASK_HISTORY before it), see `historyOps` in etcd/transactions.
 */
function closeAttempt(
  task: TaskRecord,
  token: bigint,
  outcome: AttemptOutcome,
  nowMs: number,
  error?: { readonly name: string; readonly message: string },
): TaskRecord {
  const { open, ...rest } = task;
  if (open === undefined) return rest;
  const entry: AttemptRecord = {
    attempt: open.attempt,
    workerId: open.workerId,
    sessionId: open.sessionId,
    token: token.toString(),
    outcome,
    ...(error === undefined ? {} : { error: clipError(error) }),
    startedAtMs: open.startedAtMs,
    endedAtMs: Math.max(nowMs, open.startedAtMs),
  };
  return { ...rest, last: entry, endedAttempts: (task.endedAttempts ?? 0) + 1 };
}

/**
 * Whether the last ended attempt of `task` is the one of grant `token`, ended with `outcome` by this
 * very worker id and session: the only case in which a repeated `task.complete` / `task.fail` (its
 * reply was lost) is answered as a replay. Anyone else — another worker quoting the ids and token,
 * the same worker in another session, or an attempt recorded without its session (by an older
 * coordinator) — gets NOT_HOLDER and learns nothing of the outcome.
 */
export function endedBy(
  task: TaskRecord,
  token: string,
  outcome: AttemptOutcome,
  holder: { readonly workerId: string; readonly sessionId: string },
): boolean {
  const last = task.last;
  return (
    last !== undefined &&
    last.token === token &&
    last.outcome === outcome &&
    last.workerId === holder.workerId &&
    last.sessionId !== undefined &&
    last.sessionId === holder.sessionId
  );
}

/** `task` not grantable before `atMs` (no field when that is not in the future). */
function notBefore(task: TaskRecord, atMs: number, nowMs: number): TaskRecord {
  const { notBeforeMs: _n, ...rest } = task;
  return atMs > nowMs ? { ...rest, notBeforeMs: atMs } : rest;
}

function terminal(task: TaskRecord, state: 'completed' | 'failed' | 'cancelled', nowMs: number): TaskRecord {
  const { notBeforeMs: _notBefore, ...rest } = task;
  return { ...rest, state, lastEvent: state, atMs: nowMs, endedAtMs: nowMs };
}

/** The task completed; `noResult`: its handler wrote nothing to the sink (see `task.complete`). */
export function completed(
  task: TaskRecord,
  token: bigint,
  resultId: string,
  nowMs: number,
  noResult = false,
): TaskRecord {
  const closed = closeAttempt(task, token, 'completed', nowMs);
  const { failures: _f, deferrals: _d, ...rest } = closed;
  const result = { resultId, token: token.toString(), ...(noResult ? { noResult: true as const } : {}) };
  return { ...terminal(rest, 'completed', nowMs), result };
}

/**
 * An attempt failed (the handler's error) or its lease ended without a result (`error` =
 * {@link LEASE_LOST_ERROR}, outcome `expired`). Failed for good when the error is not retryable
 * (by the worker's flag or by name in the policy) or no attempt is left; otherwise pending again:
 * after the backoff for this many consecutive failures, or at once after a lost lease.
 */
export function attemptFailed(
  task: TaskRecord,
  token: bigint,
  error: FailureInfo,
  outcome: 'failed' | 'expired',
  env: LifecycleEnv,
): TaskRecord {
  const policy = policyOf(task, env.defaults);
  const failures = (task.failures ?? 0) + 1;
  const lastError = clipError(error);
  const closed = { ...closeAttempt(task, token, outcome, env.nowMs, lastError), failures, lastError };
  const retryable = error.retryable && !policy.nonRetryable.includes(error.name);
  if (!retryable || task.attempts >= policy.maxAttempts) return terminal(closed, 'failed', env.nowMs);
  if (outcome === 'expired') {
    // A lost lease is retried at once: takeover stays fast, and a task that kills its workers is
    // already slowed down by the session TTL each loss takes to detect (and ends failed at the
    // attempt limit).
    return { ...notBefore(closed, 0, env.nowMs), lastEvent: 'expired', atMs: env.nowMs };
  }
  return {
    ...notBefore(closed, env.nowMs + retryDelayMs(policy.backoff, failures, env.random), env.nowMs),
    lastEvent: 'retrying',
    atMs: env.nowMs,
  };
}

/** The worker gave the lease back: the attempt is given back too, no backoff. */
export function released(task: TaskRecord, token: bigint, nowMs: number): TaskRecord {
  return {
    ...closeAttempt(task, token, 'released', nowMs),
    attempts: Math.max(0, task.attempts - 1),
    lastEvent: 'released',
    atMs: nowMs,
  };
}

/**
 * The grant never reached the worker (the sink could not advance the fence): the attempt is given
 * back, and the task backs off on its own count of consecutive abandoned grants, so a sink outage
 * costs a bounded number of grant attempts and no attempt of the task's budget.
 */
export function abandoned(task: TaskRecord, token: bigint, reason: string, env: LifecycleEnv): TaskRecord {
  const deferrals = (task.deferrals ?? 0) + 1;
  const backoff = policyOf(task, env.defaults).backoff;
  const closed = closeAttempt(task, token, 'abandoned', env.nowMs, { name: 'SinkUnavailable', message: reason });
  return {
    ...notBefore(closed, env.nowMs + retryDelayMs(backoff, deferrals, env.random), env.nowMs),
    attempts: Math.max(0, task.attempts - 1),
    deferrals,
    lastEvent: 'abandoned',
    atMs: env.nowMs,
  };
}

/** Cancelled; the open attempt (if the task is leased, with the holder's token) ends with it. */
export function cancelled(task: TaskRecord, holderToken: bigint | undefined, nowMs: number): TaskRecord {
  const closed = holderToken === undefined ? task : closeAttempt(task, holderToken, 'cancelled', nowMs);
  return terminal(closed, 'cancelled', nowMs);
}

/** Failed -> pending with a fresh attempt budget (the history stays). */
export function retried(task: TaskRecord, nowMs: number): TaskRecord {
  const { endedAtMs: _e, notBeforeMs: _n, failures: _f, deferrals: _d, open: _o, ...rest } = task;
  return { ...rest, state: 'pending', attempts: 0, lastEvent: 'retried', atMs: nowMs };
}

/**
 * The state the admin API shows: `leased` when an owner key of this task exists, `delayed` for a
 * pending task waiting for its time.
 */
export function viewState(task: TaskRecord, leased: boolean, nowMs: number): TaskStateName {
  if (task.state !== 'pending') return task.state;
  if (leased) return 'leased';
  return (task.notBeforeMs ?? 0) > nowMs ? 'delayed' : 'pending';
}

/** What last happened to the task (records of older coordinators: submitted or granted). */
export function lastEventOf(task: TaskRecord): TaskEventKind {
  if (task.lastEvent !== undefined) return task.lastEvent;
  if (task.state !== 'pending') return task.state;
  return task.attempts > 0 ? 'granted' : 'submitted';
}
