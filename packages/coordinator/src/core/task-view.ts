/**
 * The admin API's views of stored records (`GET /v1/tasks/...`, `GET /v1/resources/...`): pure
 * functions of a task record, its owner key and the time.
 */
import { formatToken, type AttemptView, type OwnerView, type RetryPolicy, type TaskView } from '@leasehold/protocol';
import { lastEventOf, policyOf, viewState } from './lifecycle.js';
import type { OwnerRecord } from './records.js';
import { queueOf, type AttemptRecord, type TaskRecord } from './task-record.js';

/** An owner key as the views need it: its record and token. */
export interface OwnerFacts {
  readonly record: OwnerRecord;
  readonly token: bigint;
}

export function ownerView(owner: OwnerFacts): OwnerView {
  const { sessionId, workerId, incarnation, attempt } = owner.record;
  return { sessionId, workerId, incarnation, attempt, token: formatToken(owner.token) };
}

/** An ended attempt as the API shows it (the session that held it is the coordinator's to know). */
export function attemptView(attempt: AttemptRecord): AttemptView {
  const { sessionId: _session, ...view } = attempt;
  return view;
}

/**
 * The admin view of a record; `owner` when the task is leased (its owner key names this task);
 * `detail` (payload and history, read on demand) for `GET /v1/tasks/:taskId` only.
 */
export function taskView(
  task: TaskRecord,
  owner: OwnerFacts | undefined,
  nowMs: number,
  defaults: RetryPolicy,
  detail?: { readonly payload: TaskView['payload'] | undefined; readonly history: readonly AttemptRecord[] },
): TaskView {
  const leased = task.state === 'pending' && owner?.record.taskId === task.taskId;
  return {
    taskId: task.taskId,
    resource: task.resource,
    queue: queueOf(task),
    ...(detail?.payload === undefined ? {} : { payload: detail.payload }),
    payloadBytes: task.payloadBytes,
    state: viewState(task, leased, nowMs),
    attempts: task.attempts,
    priority: task.priority ?? 0,
    retry: policyOf(task, defaults),
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
