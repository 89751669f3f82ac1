/**
 * The console's tasks view per queue (issue 25): a queue column, a queue filter, counts of the queue;
 * and the window (offset, limit) both lists answer.
 */
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import type { TaskRecord } from '../../core/task-record.js';
import { ConsoleView } from './console-view.js';

const record = (taskId: string, queue: string | undefined, state: TaskRecord['state'] = 'pending'): TaskRecord => ({
  v: 2,
  taskId,
  resource: `r-${taskId}`,
  ...(queue === undefined ? {} : { queue }),
  payloadBytes: 2,
  payloadDigest: 'd',
  state,
  attempts: 0,
  atMs: 1,
});

describe('ConsoleView tasks per queue', () => {
  const view = new ConsoleView(DEFAULT_RETRY_POLICY);
  view.reset(
    [
      { record: record('a', 'emails'), modRevision: 2n },
      { record: record('b', 'emails', 'completed'), modRevision: 3n },
      { record: record('c', undefined), modRevision: 4n },
    ],
    [],
    [],
  );

  it('shows each task with its queue (default for records without one)', () => {
    const page = view.tasks({ offset: 0, limit: 10 }, 10);
    expect(Object.fromEntries(page.items.map((r) => [r.taskId, r.queue]))).toEqual({
      a: 'emails',
      b: 'emails',
      c: 'default',
    });
  });

  it('filters by queue, and counts only that queue', () => {
    const page = view.tasks({ queue: 'emails', offset: 0, limit: 10 }, 10);
    expect(page.items.map((r) => r.taskId).sort()).toEqual(['a', 'b']);
    expect(page.counts).toEqual({ pending: 1, completed: 1 });
    expect(view.tasks({ queue: 'default', offset: 0, limit: 10 }, 10).items.map((r) => r.taskId)).toEqual(['c']);
  });

  it('windows both lists by offset and limit; the total counts every match', () => {
    const tasks = [0, 1, 2, 3].map((offset) => view.tasks({ offset, limit: 1 }, 10));
    expect(tasks.map((p) => [p.total, p.offset, p.items.map((r) => r.taskId)])).toEqual([
      [3, 0, ['a']],
      [3, 1, ['b']],
      [3, 2, ['c']],
      [3, 3, []],
    ]);
    const resources = [0, 1, 2].map((offset) => view.resources({ offset, limit: 1 }, 10));
    expect(resources.map((p) => [p.total, p.items.length])).toEqual([
      [3, 1],
      [3, 1],
      [3, 1],
    ]);
    expect(new Set(resources.flatMap((p) => p.items.map((r) => r.resource)))).toEqual(new Set(['r-a', 'r-b', 'r-c']));
  });
});
