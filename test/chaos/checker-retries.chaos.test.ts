/**
 * The retry rules on crafted histories (etcd's writes of task records, as collect.ts reads them):
 * a legal lifecycle — a failure, its backoff, a release given back, an expiry counted, a task that
 * used its whole budget and ended failed — passes; a grant past the budget, a grant before the
 * backoff, before the stored notBefore or before the submit delay are each reported by name.
 */
import { describe, expect, it } from 'vitest';
import { checkHistory, ViolationName } from './checker.js';
import { checkRetries, minRetryDelayMs, NOT_BEFORE_TOLERANCE_MS } from './checker-retries.js';
import type { AttemptEnd, History, OwnerInterval, RetrySpec, TaskRecord, TaskVersion } from './history.js';

const T0 = 1_700_000_000_000;
const POLICY: RetrySpec = { maxAttempts: 2, backoff: { initialMs: 500, multiplier: 2, maxMs: 2_000, jitter: 0.2 } };

/** A grant at `at` ms, or the end of the `end`-th grant (0-based) with `outcome`. */
type Step =
  | { readonly kind: 'grant'; readonly at: number }
  | {
      readonly kind: 'end';
      readonly end: number;
      readonly outcome: AttemptEnd['outcome'];
      readonly at: number;
      readonly notBefore?: number | undefined;
      readonly state?: string;
    };
const g = (at: number): Step => ({ kind: 'grant', at });
const e = (end: number, outcome: string, at: number, more: { notBefore?: number; state?: string } = {}): Step => ({
  kind: 'end',
  end,
  outcome,
  at,
  ...more,
});

/** The task record's writes for a sequence of grants and ends (revisions from `rev0`, one per step). */
function versions(taskId: string, rev0: number, steps: readonly Step[]): TaskVersion[] {
  const out: TaskVersion[] = [
    { taskId, revision: String(rev0), state: 'pending', lastEvent: 'submitted', attempts: 0, ended: [] },
  ];
  let attempts = 0;
  const open = new Map<number, { attempt: number; at: number }>();
  steps.forEach((s, i) => {
    const revision = String(rev0 + 1 + i);
    if (s.kind === 'grant') {
      attempts += 1;
      open.set(Number(revision), { attempt: attempts, at: s.at });
      out.push({
        taskId,
        revision,
        state: 'pending',
        lastEvent: 'granted',
        attempts,
        open: { attempt: attempts, workerId: 'w1', startedAtMs: T0 + s.at },
        ended: [],
      });
      return;
    }
    const token = [...open.keys()][s.end]!;
    const o = open.get(token)!;
    if (s.outcome === 'released' || s.outcome === 'abandoned') attempts -= 1;
    out.push({
      taskId,
      revision,
      state: s.state ?? (s.outcome === 'completed' ? 'completed' : 'pending'),
      lastEvent: s.outcome,
      attempts,
      ...(s.notBefore === undefined ? {} : { notBeforeMs: T0 + s.notBefore }),
      ended: [
        {
          attempt: o.attempt,
          workerId: 'w1',
          token: String(token),
          outcome: s.outcome,
          startedAtMs: T0 + o.at,
          endedAtMs: T0 + s.at,
        },
      ],
    });
  });
  return out;
}

function history(tasks: { record: TaskRecord; versions: TaskVersion[]; final: string }[], extra = {}): History {
  return {
    startedAtMs: T0,
    endedAtMs: T0 + 20_000,
    healedAtMs: T0 + 10_000,
    completionBoundMs: 5_000,
    tasks: tasks.map((t) => t.record),
    events: [],
    faults: [],
    decisions: [],
    decisionsComplete: true,
    owners: undefined,
    finalTasks: tasks.map((t) => ({ taskId: t.record.taskId, state: t.final, completedSeenAtMs: T0 + 9_000 })),
    finalResults: [],
    logs: [],
    exits: [],
    taskVersions: tasks.flatMap((t) => t.versions),
    ...extra,
  };
}

const record = (taskId: string, extra: Partial<TaskRecord> = {}): TaskRecord => ({
  taskId,
  resource: `r-${taskId}`,
  deterministic: false,
  submittedAtMs: T0,
  retry: POLICY,
  mayFail: true,
  ...extra,
});

/** t1: fails, backs off (>= 400 ms), is released (given back), completes: 2 counted attempts of 2. */
const t1Steps: Step[] = [
  g(100),
  e(0, 'failed', 200, { notBefore: 650 }),
  g(650),
  e(1, 'released', 700),
  g(710),
  e(2, 'completed', 900),
];
/** t2: one attempt allowed; its lease expires (counts) and it ends failed. */
const t2Steps: Step[] = [g(100), e(0, 'expired', 2_500, { state: 'failed' })];

function legal(): History {
  return history([
    { record: record('t1'), versions: versions('t1', 10, t1Steps), final: 'completed' },
    {
      record: record('t2', { retry: { ...POLICY, maxAttempts: 1 } }),
      versions: versions('t2', 30, t2Steps),
      final: 'failed',
    },
  ]);
}

const names = (h: History): string[] => checkHistory(h).map((v) => v.name);

describe('chaos checker: retry policy', () => {
  it('a legal lifecycle passes: backoff kept, release given back, expiry counted, budget-exhausted task failed', () => {
    const h = legal();
    expect(checkHistory(h)).toEqual([]);
    const stats = checkRetries(h).stats;
    expect(stats).toMatchObject({ tasksJudged: 2, grants: 4, countedAttempts: 3, failedAttempts: 1, endedFailed: 1 });
    expect(stats.backoffsJudged).toBe(1);
    expect(stats.minBackoffObservedMs).toBe(450);
  });

  it('minRetryDelayMs: the policy delay at its largest jitter, capped, raised cap', () => {
    expect(minRetryDelayMs(POLICY.backoff, 1)).toBe(400);
    expect(minRetryDelayMs(POLICY.backoff, 2)).toBe(800);
    expect(minRetryDelayMs(POLICY.backoff, 5)).toBe(1_600); // 8000 capped at 2000, × 0.8
    expect(minRetryDelayMs({ initialMs: 300, multiplier: 2, maxMs: 100, jitter: 0 }, 1)).toBe(300);
  });

  it('retry-budget-exceeded: a task granted again after its last counted attempt', () => {
    const h = history([
      {
        record: record('t2', { retry: { ...POLICY, maxAttempts: 1 } }),
        versions: versions('t2', 30, [g(100), e(0, 'expired', 2_500), g(2_600), e(1, 'completed', 2_700)]),
        final: 'completed',
      },
    ]);
    const v = checkHistory(h);
    expect(v.map((x) => x.name)).toEqual([ViolationName.RETRY_BUDGET_EXCEEDED]);
    expect(v[0]).toMatchObject({ taskId: 't2', token: '33' });
  });

  it('retry-budget-exceeded also counts a grant seen only as an owner key', () => {
    const only = versions('t2', 30, t2Steps).slice(0, 2); // submitted, granted (rev 31)
    const owners: OwnerInterval[] = [
      { resource: 'r-t2', token: '31', endRevision: '32', taskId: 't2' },
      { resource: 'r-t2', token: '40', endRevision: '41', taskId: 't2' },
    ];
    const h = history(
      [{ record: record('t2', { retry: { ...POLICY, maxAttempts: 1 } }), versions: only, final: 'completed' }],
      {
        owners,
      },
    );
    expect(names(h)).toContain(ViolationName.RETRY_BUDGET_EXCEEDED);
  });

  it('given-back attempts do not count: released and abandoned grants beyond maxAttempts are legal', () => {
    const h = history([
      {
        record: record('t3', { retry: { ...POLICY, maxAttempts: 1 } }),
        versions: versions('t3', 50, [
          g(100),
          e(0, 'released', 200),
          g(210),
          e(1, 'abandoned', 300, { notBefore: 800 }),
          g(800),
          e(2, 'completed', 900),
        ]),
        final: 'completed',
      },
    ]);
    expect(checkHistory(h)).toEqual([]);
  });

  it('granted-before-not-before: a grant inside the backoff after a failed attempt (policy floor)', () => {
    const steps = t1Steps.map((s, i) => (i === 1 ? e(0, 'failed', 200) : i === 2 ? g(450) : s));
    const h = history([{ record: record('t1'), versions: versions('t1', 10, steps), final: 'completed' }]);
    const v = checkHistory(h);
    expect(v.map((x) => x.name)).toEqual([ViolationName.GRANTED_BEFORE_NOT_BEFORE]);
    expect(v[0]?.message).toMatch(/150 ms before its notBefore \(attempt 1 .* ended failed/);
  });

  it('granted-before-not-before: a grant before the stored notBeforeMs, beyond the tolerance only', () => {
    const at = (ms: number): History => {
      const steps = t1Steps.map((s, i) => (i === 1 ? e(0, 'failed', 200, { notBefore: 900 }) : i === 2 ? g(ms) : s));
      return history([{ record: record('t1'), versions: versions('t1', 10, steps), final: 'completed' }]);
    };
    expect(names(at(900 - NOT_BEFORE_TOLERANCE_MS))).toEqual([]);
    expect(names(at(900 - NOT_BEFORE_TOLERANCE_MS - 1))).toEqual([ViolationName.GRANTED_BEFORE_NOT_BEFORE]);
  });

  it('granted-before-not-before: a first grant before the submit delay', () => {
    const h = history([
      {
        record: record('t4', { notBeforeMs: T0 + 1_000, mayFail: false }),
        versions: versions('t4', 60, [g(900), e(0, 'completed', 1_000)]),
        final: 'completed',
      },
    ]);
    expect(names(h)).toEqual([ViolationName.GRANTED_BEFORE_NOT_BEFORE]);
  });

  it('with faked coordinator wall clocks the notBefore half is not judged (N8); the budget still is', () => {
    const steps = t1Steps.map((s, i) => (i === 2 ? g(250) : s));
    const h = history([{ record: record('t1'), versions: versions('t1', 10, steps), final: 'completed' }], {
      wallClocksFaked: true,
    });
    expect(names(h)).toEqual([]);
    expect(checkRetries(h).stats.notBeforeJudged).toBe(false);
  });

  it('task-not-completed: ending failed before the budget is used up, or without failing on purpose', () => {
    const early = history([
      { record: record('t1'), versions: versions('t1', 10, t1Steps.slice(0, 2)), final: 'failed' },
    ]);
    expect(names(early)).toEqual([ViolationName.TASK_NOT_COMPLETED]);
    const h = legal();
    const notOnPurpose = { ...h, tasks: h.tasks.map((t) => ({ ...t, mayFail: false })) };
    expect(names(notOnPurpose)).toEqual([ViolationName.TASK_NOT_COMPLETED]);
  });
});
