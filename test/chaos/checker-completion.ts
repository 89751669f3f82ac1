/**
 * Liveness: after the faults heal, every task completes within the bound, with its result stored —
 * or, when its handler fails on purpose, ends `failed` having used its whole attempt budget.
 *
 * Where an end comes from. The runner's polls of the admin API give a task's state while the
 * coordinators still hold it. A coordinator with retention removes ended tasks from etcd, so a task
 * can vanish from the list (`removed`, with the time the runner first found it gone) — and then
 * nothing is read back from the coordinator: its end is judged from the workers' logs (`task
 * completed`, logged when the coordinator confirmed the completion, with the result id), from
 * etcd's history of the task record (a `failed` end, when it could be read), and from what the
 * runner saw before the task went; its result from the sink. A removed task with no such evidence
 * is a violation: retention must not remove a task that did not end.
 */
import { mayEndFailed } from './checker-retries.js';
import type { FinalTask, History, TaskRecord } from './history.js';
import type { Violation } from './violation.js';

export const CompletionViolation = {
  /** A task did not complete within the bound after the faults healed. */
  TASK_NOT_COMPLETED: 'task-not-completed',
  /** The task completed but the sink has no result for it. */
  COMPLETED_WITHOUT_RESULT: 'completed-without-result',
} as const;

interface End {
  readonly state: 'completed' | 'failed';
  /** Upper bound of when it ended (host clock), if known. */
  readonly atMs: number | undefined;
  /** The result id it completed with, if known. */
  readonly resultId: string | undefined;
}

const minOf = (...xs: (number | undefined)[]): number | undefined => {
  const known = xs.filter((x): x is number => x !== undefined);
  return known.length === 0 ? undefined : Math.min(...known);
};

/** How the history shows `task` ended, or undefined when nothing shows it did. */
function endOf(history: History, task: TaskRecord, final: FinalTask | undefined): End | undefined {
  if (final === undefined) return undefined;
  if (final.state === 'completed')
    return { state: 'completed', atMs: final.completedSeenAtMs, resultId: final.result?.resultId };
  if (final.state === 'failed')
    return mayEndFailed(history, task)
      ? { state: 'failed', atMs: final.completedSeenAtMs, resultId: undefined }
      : undefined;
  if (final.state !== 'removed') return undefined;
  const confirmed = history.events.find((e) => e.kind === 'complete' && e.taskId === task.taskId);
  if (confirmed !== undefined || final.lastSeenState === 'completed') {
    return {
      state: 'completed',
      atMs: minOf(final.completedSeenAtMs, confirmed?.atMs, final.removedSeenAtMs),
      resultId: (confirmed?.kind === 'complete' ? confirmed.resultId : undefined) ?? final.result?.resultId,
    };
  }
  const failedInEtcd = history.taskVersions?.some((v) => v.taskId === task.taskId && v.state === 'failed') === true;
  if ((final.lastSeenState === 'failed' || failedInEtcd) && mayEndFailed(history, task))
    return { state: 'failed', atMs: minOf(final.completedSeenAtMs, final.removedSeenAtMs), resultId: undefined };
  return undefined;
}

export function checkCompletion(history: History): Violation[] {
  const out: Violation[] = [];
  const finals = new Map(history.finalTasks.map((t) => [t.taskId, t]));
  const stored = new Set(history.finalResults.map((r) => `${r.resource}|${r.resultId}`));
  const deadline = history.healedAtMs + history.completionBoundMs;
  for (const task of history.tasks) {
    const final = finals.get(task.taskId);
    const base = { resource: task.resource, taskId: task.taskId };
    const end = endOf(history, task, final);
    if (end === undefined) {
      out.push({
        name: CompletionViolation.TASK_NOT_COMPLETED,
        message:
          final?.state === 'failed'
            ? `task ${task.taskId} is failed before its attempt budget was used up (or its handler never fails)`
            : final?.state === 'removed'
              ? `task ${task.taskId} was removed from the coordinator (last seen ${final.lastSeenState ?? 'never'}) but no worker log, etcd history or earlier read shows it ended`
              : `task ${task.taskId} is ${final?.state ?? 'unknown'} ${history.completionBoundMs} ms after the faults healed`,
        atMs: deadline,
        ...base,
      });
      continue;
    }
    if (end.atMs !== undefined && end.atMs > deadline) {
      out.push({
        name: CompletionViolation.TASK_NOT_COMPLETED,
        message: `task ${task.taskId} completed ${end.atMs - history.healedAtMs} ms after the faults healed (bound ${history.completionBoundMs} ms)`,
        atMs: end.atMs,
        ...base,
      });
    }
    if (end.state !== 'completed') continue;
    const has =
      end.resultId === undefined
        ? // Removed, and no log named the result id: any result of this task will do.
          history.finalResults.some(
            (r) =>
              r.resource === task.resource &&
              (r.resultId === `task:${task.taskId}` || r.resultId.startsWith(`task:${task.taskId}@`)),
          )
        : stored.has(`${task.resource}|${end.resultId}`);
    // A task read back as completed without a result id is the coordinator's own business (as before).
    if (!has && (end.resultId !== undefined || final?.state === 'removed')) {
      out.push({
        name: CompletionViolation.COMPLETED_WITHOUT_RESULT,
        message: `task ${task.taskId} is completed with ${end.resultId ?? 'a result'}${final?.result === undefined ? '' : ` (token ${final.result.token})`} but the sink has no such result`,
        ...(final?.result === undefined ? {} : { token: final.result.token }),
        ...base,
      });
    }
  }
  return out;
}
