/**
 * Which ended tasks retention removes from etcd, as one pure decision over the index's ended tasks
 * (no clock of its own: `nowMs` is given). Per end state (completed, failed, cancelled):
 *
 * 1. **age**: a task is removed once `now − endedAtMs ≥` its maximum age — its own rule for the
 *    state it ended in (submit's `retention`; `null`: never by age), else the state's `maxAgeMs`;
 * 2. **count**: of the tasks left that follow the installation's rule (no own rule), only the
 *    newest `maxCount` are kept; older ones go, but never one that ended less than `minAgeMs` ago
 *    (a client reading the outcome right after the end still finds it);
 * 3. **bytes**: over every state, while the payload bytes of the tasks left exceed `maxBytes`, the
 *    oldest go — tasks with their own rule too: the cap keeps etcd away from its quota.
 *
 * The removals come oldest first, at most `limit` of them. Each names the record's mod_revision as
 * the index saw it: the delete compares it, so a task retried since (or otherwise changed) stays.
 */
import type { EndedTask, TaskIndex } from './task-index.js';

export interface RetentionRule {
  readonly maxAgeMs: number | null;
  readonly maxCount: number | null;
}

export interface RetentionPolicy {
  readonly completed: RetentionRule;
  readonly failed: RetentionRule;
  readonly cancelled: RetentionRule;
  readonly maxBytes: number | null;
  readonly minAgeMs: number;
}

export type RemovalReason = 'age' | 'count' | 'bytes';

export interface Removal {
  readonly taskId: string;
  readonly modRevision: bigint;
  readonly state: EndedTask['state'];
  readonly reason: RemovalReason;
}

const STATES = ['completed', 'failed', 'cancelled'] as const;

/** Newest first (ties: the greater id first, so the order is total). */
function newestFirst(a: EndedTask, b: EndedTask): number {
  return b.endedAtMs - a.endedAtMs || (a.taskId < b.taskId ? 1 : a.taskId > b.taskId ? -1 : 0);
}

export function planRetention(
  tasks: Iterable<EndedTask>,
  policy: RetentionPolicy,
  nowMs: number,
  limit: number,
): Removal[] {
  const removed: (Removal & { readonly endedAtMs: number })[] = [];
  const kept: EndedTask[] = [];
  const byState: Record<EndedTask['state'], EndedTask[]> = { completed: [], failed: [], cancelled: [] };
  for (const task of tasks) {
    const rule = policy[task.state];
    const maxAge = task.keep !== undefined ? task.keep : rule.maxAgeMs;
    if (maxAge !== null && nowMs - task.endedAtMs >= maxAge) {
      removed.push({ ...ref(task, 'age'), endedAtMs: task.endedAtMs });
    } else if (task.keep === undefined && rule.maxCount !== null) {
      byState[task.state].push(task);
    } else {
      kept.push(task);
    }
  }
  for (const state of STATES) {
    const maxCount = policy[state].maxCount;
    const counted = byState[state].sort(newestFirst);
    counted.forEach((task, i) => {
      if (maxCount !== null && i >= maxCount && nowMs - task.endedAtMs >= policy.minAgeMs) {
        removed.push({ ...ref(task, 'count'), endedAtMs: task.endedAtMs });
      } else kept.push(task);
    });
  }
  if (policy.maxBytes !== null) {
    let bytes = 0;
    for (const task of kept) bytes += task.payloadBytes;
    kept.sort(newestFirst);
    for (let i = kept.length - 1; i >= 0 && bytes > policy.maxBytes; i -= 1) {
      const task = kept[i];
      if (task === undefined) continue;
      bytes -= task.payloadBytes;
      removed.push({ ...ref(task, 'bytes'), endedAtMs: task.endedAtMs });
    }
  }
  return removed
    .sort((a, b) => a.endedAtMs - b.endedAtMs || (a.taskId < b.taskId ? -1 : a.taskId > b.taskId ? 1 : 0))
    .slice(0, limit)
    .map(({ endedAtMs: _e, ...removal }) => removal);
}

function ref(task: EndedTask, reason: RemovalReason): Removal {
  return { taskId: task.taskId, modRevision: task.modRevision, state: task.state, reason };
}

/** An operator's purge (`POST /v1/tasks/purge`): ended tasks of one state, ended long enough ago. */
export interface PurgeRequest {
  readonly state: EndedTask['state'];
  readonly olderThanMs: number;
  /** At most this many (default 1000). */
  readonly limit?: number | undefined;
}

/**
 * What a purge deletes now — oldest first, at most `limit` — and whether more are left for the
 * next call. Each names the record's mod_revision as the index saw it (the delete compares it).
 */
export function planPurge(
  tasks: Iterable<EndedTask>,
  request: PurgeRequest,
  nowMs: number,
): { readonly refs: { readonly taskId: string; readonly modRevision: bigint }[]; readonly more: boolean } {
  const cutoff = nowMs - request.olderThanMs;
  const candidates: EndedTask[] = [];
  for (const t of tasks) if (t.state === request.state && t.endedAtMs <= cutoff) candidates.push(t);
  candidates.sort((a, b) => a.endedAtMs - b.endedAtMs || (a.taskId < b.taskId ? -1 : 1));
  const refs = candidates
    .slice(0, request.limit ?? 1_000)
    .map((t) => ({ taskId: t.taskId, modRevision: t.modRevision }));
  return { refs, more: candidates.length > refs.length };
}

/**
 * After a purge or a sweep: the index forgets the tasks whose delete landed (`gone`, by id), each
 * only if it still holds the revision the delete compared (see {@link TaskIndex.applyOwnDelete}).
 */
export function forgetPurged(
  index: Pick<TaskIndex, 'applyOwnDelete'>,
  refs: readonly { readonly taskId: string; readonly modRevision: bigint }[],
  gone: readonly string[],
): void {
  if (gone.length === 0) return;
  const landed = new Set(gone);
  for (const r of refs) if (landed.has(r.taskId)) index.applyOwnDelete(r.taskId, r.modRevision);
}
