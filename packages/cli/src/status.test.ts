import type { ResourceOwnerView, TaskView } from '@leasehold/client';
import { describe, expect, it } from 'vitest';
import type { TaskPage } from '@leasehold/client';
import { firstTasks, renderStatus, rowsOf, STATUS_MAX_TASKS, tasksByResource, useColour } from './status.js';

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const task = (over: Partial<TaskView> & Pick<TaskView, 'taskId'>): TaskView => ({
  resource: 'acct/7',
  queue: 'default',
  payload: {},
  payloadBytes: 2,
  state: 'completed',
  attempts: 1,
  priority: 0,
  retry: {
    maxAttempts: 3,
    backoff: { initialMs: 1_000, multiplier: 2, maxMs: 300_000, jitter: 0.2 },
    nonRetryable: [],
  },
  lastEvent: 'completed',
  history: [],
  ...over,
});
const done = (taskId: string, token: string, endedAtMs: number): TaskView =>
  task({
    taskId,
    createdAtMs: endedAtMs - 100,
    endedAtMs,
    result: { resultId: `task:${taskId}`, token },
    history: [{ attempt: 1, workerId: 'w1', token, outcome: 'completed', startedAtMs: endedAtMs - 50, endedAtMs }],
  });

// "a-first" sorts first by name but is the older task: its token 33, the fence 66 set by "z-later".
const older = done('a-first', '33', NOW - 60_000);
const later = done('z-later', '66', NOW - 1_000);

describe('leasehold status rows', () => {
  it('counts the tasks of each queue by state (default first, then by name)', () => {
    const rows = [
      ...rowsOf([task({ taskId: 'd1', resource: 'r1', state: 'pending' })], undefined, 1n, false),
      ...rowsOf([task({ taskId: 'm1', resource: 'r2', queue: 'demo' })], undefined, 1n, false),
      ...rowsOf([task({ taskId: 'm2', resource: 'r3', queue: 'demo', state: 'failed' })], undefined, 1n, false),
      ...rowsOf([task({ taskId: 'a1', resource: 'r4', queue: 'alpha' })], undefined, 1n, false),
    ];
    const text = renderStatus(rows, false);
    expect(text.split('\n').slice(-3)).toEqual([
      'queue default: 0 leased, 1 pending',
      'queue alpha: 0 leased, 0 pending, 1 completed',
      'queue demo: 0 leased, 0 pending, 1 failed, 1 completed',
    ]);
    expect(text).toMatch(/^r2 +m1 +demo +completed/m);
  });

  it('shows the latest task of a resource, not the alphabetically first, with the fence its grant set', () => {
    const [group] = [...tasksByResource([older, later]).values()];
    const rows = rowsOf(group!, undefined, 66n, false);
    expect(rows).toEqual([
      expect.objectContaining({ task: 'z-later', token: '66', fence: '66', fenceSetBy: undefined, state: 'completed' }),
    ]);
  });

  it('--all: every task, latest first, each token beside the fence and who set it', () => {
    const [group] = [...tasksByResource([older, later]).values()];
    const rows = rowsOf(group!, undefined, 66n, true);
    expect(rows.map((r) => [r.task, r.token, r.fence, r.fenceSetBy])).toEqual([
      ['z-later', '66', '66', undefined],
      ['a-first', '33', '66', 'z-later'],
    ]);
    const text = renderStatus(rows, false);
    expect(text).toMatch(/^acct\/7 +a-first +default +completed +- +33 +66 by z-later +- +1$/m);
    expect(text).toContain('1 resources: 0 leased, 0 pending, 1 completed');
  });

  it('a live grant wins over a later-ended task and shows its own token and lease', () => {
    const live = task({
      taskId: 'b-live',
      state: 'leased',
      createdAtMs: NOW - 90_000,
      owner: { sessionId: 's1', workerId: 'w9', incarnation: 'i1', token: '70', attempt: 1 },
    });
    const owner = {
      resource: 'acct/7',
      owner: {
        sessionId: 's1',
        workerId: 'w9',
        incarnation: 'i1',
        token: '70',
        attempt: 1,
        taskId: 'b-live',
        coordinatorId: 'c0',
      },
      token: '70',
      remainingMs: 1_500,
    } as ResourceOwnerView;
    const [group] = [...tasksByResource([later, live, older]).values()];
    const [row] = rowsOf(group!, owner, 70n, false);
    expect(row).toMatchObject({
      task: 'b-live',
      state: 'leased',
      owner: 'w9',
      token: '70',
      fence: '70',
      leftMs: 1_500,
    });
  });

  it('a pending task submitted after a completed one is the latest; the fence names the task that set it', () => {
    const fresh = task({ taskId: 'a-new', state: 'pending', lastEvent: 'submitted', createdAtMs: NOW });
    const [group] = [...tasksByResource([later, fresh]).values()];
    const [row] = rowsOf(group!, undefined, 66n, false);
    expect(row).toMatchObject({ task: 'a-new', state: 'pending', token: '', fence: '66', fenceSetBy: 'z-later' });
  });
});

describe('colour', () => {
  it('on a terminal only, and not with NO_COLOR set', () => {
    expect(useColour(true, {})).toBe(true);
    expect(useColour(true, { NO_COLOR: '1' })).toBe(false);
    expect(useColour(true, { NO_COLOR: '' })).toBe(true);
    expect(useColour(false, {})).toBe(false);
    expect(useColour(undefined, {})).toBe(false);
  });

  it('colours the state cell by state and keeps plain output free of escapes', () => {
    const rows = rowsOf([later], undefined, 66n, false);
    expect(renderStatus(rows, true)).toContain('\u001b[32mcompleted\u001b[0m');
    expect(renderStatus(rows, false)).not.toContain('\u001b[');
  });
});

describe('leasehold status reads a bounded number of tasks', () => {
  /** The coordinator's list: `total` tasks in id order, pages of at most `limit`. */
  const pages = (total: number) => {
    const limits: number[] = [];
    const ids = Array.from({ length: total }, (_, i) => `t${String(i).padStart(7, '0')}`);
    return {
      limits,
      list: async (o: { limit?: number; after?: string } = {}): Promise<TaskPage> => {
        const limit = o.limit ?? 100;
        limits.push(limit);
        const from = o.after === undefined ? 0 : ids.indexOf(o.after) + 1;
        const slice = ids.slice(from, from + limit);
        const last = slice.at(-1);
        return {
          tasks: slice.map((taskId) => task({ taskId })),
          next: from + limit < total && last !== undefined ? last : null,
        };
      },
    };
  };

  it('stops at the bound on a long backlog, in pages of 500, and says there is more', async () => {
    const admin = pages(20_000);
    const { tasks, more } = await firstTasks(admin, 1_200);
    expect(tasks).toHaveLength(1_200);
    expect(more).toBe(true);
    expect(admin.limits).toEqual([500, 500, 200]);
    expect(new Set(tasks.map((t) => t.taskId)).size).toBe(1_200);
  });

  it('reads every task of a short list and says there is no more', async () => {
    const admin = pages(700);
    const { tasks, more } = await firstTasks(admin, STATUS_MAX_TASKS);
    expect(tasks.map((t) => t.taskId)).toEqual(Array.from({ length: 700 }, (_, i) => `t${String(i).padStart(7, '0')}`));
    expect(more).toBe(false);
  });

  it('the rendering names the bound when there is more', () => {
    const rows = rowsOf([older], undefined, undefined, false);
    expect(renderStatus(rows, false, 40, true)).toContain(`the first ${STATUS_MAX_TASKS} tasks`);
    expect(renderStatus(rows, false, 40, false)).not.toContain('the first');
  });
});
