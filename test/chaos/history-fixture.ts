/**
 * The checker tests' recorded history (checker.chaos.test.ts, backlog.chaos.test.ts): the design
 * note's story as the runner would record it, and a helper to make bad variants of it.
 */
import type { Violation } from './checker.js';
import type { History, SinkDecision, WorkerEvent } from './history.js';

export const T0 = 1_700_000_000_000;

/**
 * The design note's story, recorded: w1 gets token 10 on r1, pauses; w2 takes over at 20 (fence
 * advanced first), writes and completes; w1's late write is refused STALE_TOKEN.
 */
export function goodHistory(): History {
  const d = (
    seq: number,
    kind: SinkDecision['kind'],
    token: string,
    fenceBefore: string,
    outcome: SinkDecision['outcome'],
    atMs: number,
    workerId?: string,
  ): SinkDecision => ({
    seq,
    kind,
    resource: 'r1',
    token,
    fenceBefore,
    outcome,
    atMs: T0 + atMs,
    ...(kind === 'write' ? { resultId: 'task:t1', workerId } : {}),
  });
  const e = (kind: WorkerEvent['kind'], process: string, token: string, atMs: number, extra = {}): WorkerEvent =>
    ({
      kind,
      process,
      workerId: process,
      taskId: 't1',
      resource: 'r1',
      token,
      atMs: T0 + atMs,
      ...extra,
    }) as WorkerEvent;
  return {
    startedAtMs: T0,
    endedAtMs: T0 + 10_000,
    healedAtMs: T0 + 5_000,
    completionBoundMs: 3_000,
    tasks: [{ taskId: 't1', resource: 'r1', deterministic: true, expected: { v: 1 }, submittedAtMs: T0 }],
    events: [
      e('grant', 'w1', '10', 100),
      e('write-attempt', 'w1', '10', 200, { resultId: 'task:t1' }),
      e('grant', 'w2', '20', 3_000),
      e('write-attempt', 'w2', '20', 3_100, { resultId: 'task:t1' }),
      e('write', 'w2', '20', 3_110, { resultId: 'task:t1', outcome: 'written' }),
      e('complete', 'w2', '20', 3_120),
      e('write', 'w1', '10', 4_000, { resultId: 'task:t1', outcome: 'STALE_TOKEN' }),
      e('lost', 'w1', '10', 4_001, { reason: 'STALE_TOKEN' }),
    ],
    faults: [{ id: 1, kind: 'self-pause', targets: ['w1'], startMs: T0 + 200, endMs: T0 + 3_900 }],
    decisions: [
      d(1, 'advance', '10', '0', 'advanced', 90),
      d(2, 'advance', '20', '10', 'advanced', 2_990),
      d(3, 'write', '20', '20', 'written', 3_105, 'w2'),
      d(4, 'write', '10', '20', 'STALE_TOKEN', 3_950, 'w1'),
    ],
    decisionsComplete: true,
    owners: [
      { resource: 'r1', token: '10', endRevision: '15', workerId: 'w1', taskId: 't1' },
      { resource: 'r1', token: '20', endRevision: '21', workerId: 'w2', taskId: 't1' },
    ],
    finalTasks: [
      { taskId: 't1', state: 'completed', result: { resultId: 'task:t1', token: '20' }, completedSeenAtMs: T0 + 3_200 },
    ],
    finalResults: [{ resource: 'r1', resultId: 'task:t1', token: '20', workerId: 'w2', payload: { v: 1 } }],
    logs: [
      {
        process: 'w1',
        text: '{"level":30,"time":1,"msg":"lease granted"}\n{"level":40,"msg":"write refused by the sink"}\n',
      },
    ],
    exits: [{ process: 'sink', atMs: T0 + 2_000, code: null, signal: 'SIGKILL', expected: true }],
  };
}

export type MutableHistory = {
  -readonly [K in keyof History]: History[K] extends readonly (infer U)[] ? U[] : History[K];
};
export function mutate(fn: (h: MutableHistory) => void): History {
  const h = structuredClone(goodHistory()) as MutableHistory;
  fn(h);
  return h;
}

export function names(vs: readonly Violation[]): string[] {
  return [...new Set(vs.map((v) => v.name))].sort();
}
