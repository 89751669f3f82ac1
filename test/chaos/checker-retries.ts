/**
 * The retry policy, judged from etcd's history of every task record (each write of
 * `<prefix>tasks/<id>` from revision 1) and of every owner key (each grant creates one):
 *
 * - `retry-budget-exceeded`: per task and attempt budget (a `POST retry` starts a new one), the
 *   grants whose attempt counts — every grant except those ended `released` or `abandoned` (given
 *   back, docs/protocol.md "Task lifecycle"); a grant still open at the end counts — are at most
 *   the `maxAttempts` the submit asked for.
 * - `granted-before-not-before`: every grant's time (`open.startedAtMs`, the granting coordinator's
 *   wall clock) is ≥ the notBefore in force, within {@link NOT_BEFORE_TOLERANCE_MS}. In force is the
 *   largest of: the `notBeforeMs` of the record the grant replaced (what the coordinators stored);
 *   after an attempt ended `failed` (or `abandoned`), its end + the policy's shortest delay for the
 *   n-th consecutive failure (n-th abandoned grant): ⌊min(maxMs, initialMs·multiplier^(n−1)) ·
 *   (1 − jitter)⌋ — computed from the policy the runner asked for, so a coordinator that ignores
 *   the policy cannot hide behind its own record; for the first grant of a task submitted with
 *   `delayMs`, the runner's first send + the delay.
 *
 * The policy comes from the runner (`TaskRecord.retry`, else `History.retryDefaults`); tasks with
 * neither are judged only against the stored notBefore. With the coordinators' wall clocks faked
 * (libfaketime) the notBefore half is not judged: `notBeforeMs` is wall-clock time and a
 * coordinator whose clock runs ahead grants early by its skew, a documented non-guarantee (N8).
 * Pure; the counts go to the summary.
 */
import type { AttemptEnd, History, RetrySpec, TaskRecord, TaskVersion } from './history.js';
import type { Violation } from './violation.js';

export const RetryViolation = {
  BUDGET_EXCEEDED: 'retry-budget-exceeded',
  GRANTED_BEFORE_NOT_BEFORE: 'granted-before-not-before',
} as const;

/**
 * Slack of the notBefore comparison. Every time compared is `Date.now()` in whole milliseconds, read
 * by processes sharing one host clock (coordinators, and the runner for submit delays); a grant at
 * exactly the notBefore is legal. 10 ms covers rounding and a small step of the host clock.
 */
export const NOT_BEFORE_TOLERANCE_MS = 10;

/** Outcomes that give the attempt back (they do not count against `maxAttempts`). */
const GIVEN_BACK = new Set(['released', 'abandoned']);

export interface RetryStats {
  /** Tasks with etcd history and a known policy (the budget rule applies). */
  readonly tasksJudged: number;
  readonly grants: number;
  /** Grants whose attempt counted. */
  readonly countedAttempts: number;
  /** Attempts ended `failed` by the handler (each one starts a backoff). */
  readonly failedAttempts: number;
  /** Grants judged against a backoff (a failed or abandoned attempt before them, with a policy). */
  readonly backoffsJudged: number;
  /** Shortest time from a failed attempt's end to the next grant, ms. */
  readonly minBackoffObservedMs: number | undefined;
  /** Tasks that ended `failed` with their budget used up. */
  readonly endedFailed: number;
  /** False when the notBefore half was not judged (faked wall clocks, or no etcd history). */
  readonly notBeforeJudged: boolean;
}

/** The policy's shortest delay after the n-th consecutive failure (jitter at its largest). */
export function minRetryDelayMs(backoff: RetrySpec['backoff'], n: number): number {
  const maxMs = Math.max(backoff.maxMs, backoff.initialMs);
  const raw = backoff.initialMs * backoff.multiplier ** Math.max(0, Math.floor(n) - 1);
  return Math.floor(Math.min(maxMs, Number.isFinite(raw) ? raw : maxMs) * (1 - backoff.jitter));
}

const big = (s: string): bigint => BigInt(s);
const byRevision = (a: { revision: string }, b: { revision: string }): number =>
  big(a.revision) < big(b.revision) ? -1 : big(a.revision) > big(b.revision) ? 1 : 0;

interface TaskAttempts {
  /** Grant tokens in order, split into attempt budgets (a `retried` write starts the next). */
  readonly budgets: string[][];
  readonly ends: Map<string, AttemptEnd>;
}

function attemptsOf(versions: readonly TaskVersion[], ownerTokens: readonly string[]): TaskAttempts {
  const ends = new Map<string, AttemptEnd>();
  const grants = new Set<string>(ownerTokens);
  const retriedAt: bigint[] = [];
  for (const v of versions) {
    for (const e of v.ended) if (!ends.has(e.token)) ends.set(e.token, e);
    if (v.lastEvent === 'granted' && v.open !== undefined) grants.add(v.revision);
    if (v.lastEvent === 'retried') retriedAt.push(big(v.revision));
  }
  const budgets: string[][] = Array.from({ length: retriedAt.length + 1 }, () => []);
  for (const token of [...grants].sort((a, b) => (big(a) < big(b) ? -1 : 1))) {
    const i = retriedAt.filter((r) => r < big(token)).length;
    budgets[i]!.push(token);
  }
  return { budgets, ends };
}

const counts = (ends: Map<string, AttemptEnd>, token: string): boolean =>
  !GIVEN_BACK.has(ends.get(token)?.outcome ?? 'open');

/**
 * May `task` end `failed`? Only a task whose handler fails on purpose, once its last budget is used
 * up (the lifecycle fails a task at the attempt that reaches `maxAttempts`; the chaos handler's
 * errors are retryable). Without etcd history: yes for such a task (not judged).
 */
export function mayEndFailed(history: History, task: TaskRecord): boolean {
  if (task.mayFail !== true) return false;
  const policy = task.retry ?? history.retryDefaults;
  if (history.taskVersions === undefined || policy === undefined) return true;
  const versions = history.taskVersions.filter((v) => v.taskId === task.taskId);
  const owners = (history.owners ?? []).filter((o) => o.taskId === task.taskId).map((o) => o.token);
  const { budgets, ends } = attemptsOf(versions, owners);
  const last = budgets[budgets.length - 1] ?? [];
  return last.filter((t) => counts(ends, t)).length >= policy.maxAttempts;
}

export function checkRetries(history: History): { violations: Violation[]; stats: RetryStats } {
  const out: Violation[] = [];
  const judgeNotBefore = history.taskVersions !== undefined && history.wallClocksFaked !== true;
  const stats = {
    tasksJudged: 0,
    grants: 0,
    countedAttempts: 0,
    failedAttempts: 0,
    backoffsJudged: 0,
    minBackoffObservedMs: undefined as number | undefined,
    endedFailed: 0,
    notBeforeJudged: judgeNotBefore,
  };
  if (history.taskVersions === undefined) return { violations: out, stats };
  const versionsOf = new Map<string, TaskVersion[]>();
  for (const v of history.taskVersions) versionsOf.set(v.taskId, [...(versionsOf.get(v.taskId) ?? []), v]);
  const ownersOf = new Map<string, string[]>();
  for (const o of history.owners ?? [])
    if (o.taskId !== undefined) ownersOf.set(o.taskId, [...(ownersOf.get(o.taskId) ?? []), o.token]);
  const finals = new Map(history.finalTasks.map((t) => [t.taskId, t]));

  for (const task of history.tasks) {
    const versions = [...(versionsOf.get(task.taskId) ?? [])].sort(byRevision);
    const policy = task.retry ?? history.retryDefaults;
    const { budgets, ends } = attemptsOf(versions, ownersOf.get(task.taskId) ?? []);
    const base = { resource: task.resource, taskId: task.taskId };
    stats.grants += budgets.reduce((n, b) => n + b.length, 0);
    for (const e of ends.values()) if (e.outcome === 'failed') stats.failedAttempts += 1;
    if (policy !== undefined) {
      stats.tasksJudged += 1;
      for (const budget of budgets) {
        const counted = budget.filter((t) => counts(ends, t));
        stats.countedAttempts += counted.length;
        if (counted.length > policy.maxAttempts) {
          const list = budget.map((t) => `${t}:${ends.get(t)?.outcome ?? 'open'}`).join(', ');
          out.push({
            name: RetryViolation.BUDGET_EXCEEDED,
            message: `task ${task.taskId}: ${counted.length} counted attempts, its policy allows ${policy.maxAttempts} (grants ${list})`,
            token: counted[policy.maxAttempts],
            ...base,
          });
        }
      }
      if (finals.get(task.taskId)?.state === 'failed' && mayEndFailed(history, task)) stats.endedFailed += 1;
    }
    if (!judgeNotBefore) continue;

    let prev: TaskVersion | undefined;
    let failures = 0;
    let deferrals = 0;
    let lastEnd: { end: AttemptEnd; n: number } | undefined;
    let firstGrant = true;
    for (const v of versions) {
      for (const e of [...v.ended].sort((a, b) => (big(a.token) < big(b.token) ? -1 : 1))) {
        if (e.outcome === 'failed' || e.outcome === 'expired') failures += 1;
        if (e.outcome === 'abandoned') deferrals += 1;
        lastEnd = { end: e, n: e.outcome === 'abandoned' ? deferrals : failures };
      }
      if (v.lastEvent === 'granted' && v.open !== undefined) {
        const at = v.open.startedAtMs;
        const floors: { atMs: number; why: string }[] = [];
        if (prev?.notBeforeMs !== undefined) floors.push({ atMs: prev.notBeforeMs, why: 'the stored notBeforeMs' });
        if (firstGrant && task.notBeforeMs !== undefined)
          floors.push({ atMs: task.notBeforeMs, why: 'the submit delay (first send + delayMs)' });
        const e = lastEnd?.end;
        if (policy !== undefined && e !== undefined && (e.outcome === 'failed' || e.outcome === 'abandoned')) {
          const delay = minRetryDelayMs(policy.backoff, lastEnd!.n);
          floors.push({
            atMs: e.endedAtMs + delay,
            why: `attempt ${e.attempt} (token ${e.token}) ended ${e.outcome} ${at - e.endedAtMs} ms before it; backoff ${lastEnd!.n} of its policy is >= ${delay} ms`,
          });
          stats.backoffsJudged += 1;
          if (e.outcome === 'failed') {
            const gap = at - e.endedAtMs;
            stats.minBackoffObservedMs = Math.min(stats.minBackoffObservedMs ?? gap, gap);
          }
        }
        for (const f of floors) {
          if (at + NOT_BEFORE_TOLERANCE_MS < f.atMs) {
            out.push({
              name: RetryViolation.GRANTED_BEFORE_NOT_BEFORE,
              message: `task ${task.taskId}: granted (token ${v.revision}, attempt ${v.open.attempt}) ${f.atMs - at} ms before its notBefore (${f.why}; tolerance ${NOT_BEFORE_TOLERANCE_MS} ms)`,
              atMs: at,
              process: v.open.workerId,
              token: v.revision,
              ...base,
            });
            break;
          }
        }
        firstGrant = false;
        lastEnd = undefined;
      }
      if (v.lastEvent === 'retried' || v.state === 'completed') {
        failures = 0;
        deferrals = 0;
        lastEnd = undefined;
      }
      prev = v;
    }
  }
  return { violations: out, stats };
}
