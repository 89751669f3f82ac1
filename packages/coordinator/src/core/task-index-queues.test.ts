/**
 * The task index per queue (issue 25): selection only from the queues asked for, the queues taking
 * turns within a priority, records without a queue in `default`, wake-ups noted per queue, and
 * counts per queue. (That a queue's entries share one name string is not observable from JS: the
 * memory bench, bench/src/scale-index.ts, measures what the entries cost.)
 */
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { entryOf, MAX_READIED_TASKS, TaskIndex, type PendingTask, type TaskEntry } from './task-index.js';
import type { TaskRecord } from './task-record.js';

function entry(record: TaskRecord, createRevision: bigint, modRevision = createRevision): TaskEntry {
  return entryOf({ record, value: JSON.stringify(record), createRevision, modRevision }, DEFAULT_RETRY_POLICY);
}

const record = (taskId: string, resource: string, queue?: string, priority = 0): TaskRecord => ({
  v: 2,
  taskId,
  resource,
  ...(queue === undefined ? {} : { queue }),
  payloadBytes: 4,
  payloadDigest: 'd',
  state: 'pending',
  attempts: 0,
  priority,
});

const task = (taskId: string, queue: string | undefined, rev: bigint, priority = 0): PendingTask =>
  entry(record(taskId, `r-${taskId}`, queue, priority), rev) as PendingTask;

/** What the index readied since the last take, as sorted arrays ('all' kept). */
function readied(index: TaskIndex): { queues: string[] | 'all'; tasks: string[] | 'all' } {
  const { queues, tasks } = index.takeReadied();
  const sorted = (set: ReadonlySet<string> | 'all') => (set === 'all' ? 'all' : [...set].sort());
  return { queues: sorted(queues), tasks: sorted(tasks) };
}
const none = { queues: [], tasks: [] };

/** Tasks of the table: a1, a2 in alpha; b1 in beta; d1 with no queue (default); d2 named default. */
function indexOfTable(): TaskIndex {
  const index = new TaskIndex();
  index.reset(
    [
      task('a1', 'alpha', 10n),
      task('b1', 'beta', 11n),
      task('a2', 'alpha', 12n),
      task('d1', undefined, 13n),
      task('d2', 'default', 14n),
    ],
    [],
    14n,
  );
  return index;
}

describe('TaskIndex per queue', () => {
  it.each([
    { name: 'no queues given: default only (records without a queue included)', queues: undefined, want: ['d1', 'd2'] },
    { name: 'one queue', queues: ['alpha'], want: ['a1', 'a2'] },
    { name: 'another queue', queues: ['beta'], want: ['b1'] },
    { name: 'a queue with no tasks', queues: ['gamma'], want: [] },
    { name: 'two queues, turn 0: alpha first', queues: ['alpha', 'beta'], want: ['a1', 'a2', 'b1'] },
    { name: 'the same queue twice counts once', queues: ['beta', 'beta'], want: ['b1'] },
    { name: 'default named explicitly', queues: ['default'], want: ['d1', 'd2'] },
  ])('selects from the queues asked for: $name', ({ queues, want }) => {
    const index = indexOfTable();
    const picked = index.select({ limit: 10, ...(queues === undefined ? {} : { queues }) });
    expect(picked.map((t) => t.taskId)).toEqual(want);
  });

  it('lets the queues take turns within a priority (turn rotates which goes first)', () => {
    const index = indexOfTable();
    const first = (turn: number): string | undefined =>
      index.select({ queues: ['alpha', 'beta', 'default'], turn })[0]?.taskId;
    expect([0, 1, 2, 3].map(first)).toEqual(['a1', 'b1', 'd1', 'a1']);
  });

  it('takes a higher priority in any served queue before a lower one in another', () => {
    const index = new TaskIndex();
    index.reset([task('a1', 'alpha', 10n, 0), task('b1', 'beta', 11n, 5)], [], 11n);
    expect(index.select({ queues: ['alpha', 'beta'], turn: 0 })[0]?.taskId).toBe('b1');
  });

  it('selects a named task only if it is in a queue asked for', () => {
    const index = indexOfTable();
    expect(index.select({ taskId: 'a1', queues: ['beta'] })).toEqual([]);
    expect(index.select({ taskId: 'a1', queues: ['alpha'] }).map((t) => t.taskId)).toEqual(['a1']);
    expect(index.select({ taskId: 'd1' }).map((t) => t.taskId)).toEqual(['d1']);
  });

  it('notes the queues that gained a grantable task, for the long polls serving them', () => {
    const index = indexOfTable();
    expect(index.takeReadied()).toEqual({ queues: 'all', tasks: 'all' }); // a reset: everything may have changed
    expect(readied(index)).toEqual(none);
    index.applyTask('b2', task('b2', 'beta', 20n));
    expect(readied(index)).toEqual({ queues: ['beta'], tasks: ['b2'] });
    // An owner on a1's resource blocks it; its delete frees it again: alpha is readied.
    index.applyOwner('r-a1', { resource: 'r-a1', taskId: 'a1', sessionId: 's', requestId: 'q', token: 21n });
    expect(readied(index)).toEqual(none);
    index.applyOwner('r-a1', undefined);
    expect(readied(index)).toEqual({ queues: ['alpha'], tasks: ['a1'] });
  });

  it(`notes at most ${MAX_READIED_TASKS} tasks between takes, then 'all' for the tasks (the queues stay exact)`, () => {
    const index = new TaskIndex();
    index.reset([], [], 1n);
    index.takeReadied();
    for (let i = 0; i <= MAX_READIED_TASKS; i += 1) index.applyTask(`t${i}`, task(`t${i}`, 'alpha', BigInt(10 + i)));
    expect(readied(index)).toEqual({ queues: ['alpha'], tasks: 'all' });
    index.applyTask('b1', task('b1', 'beta', 5_000n));
    expect(readied(index)).toEqual({ queues: ['beta'], tasks: ['b1'] });
  });

  it('notes no queue for a delayed task until it is promoted; promoting notes the queues of the due ones', () => {
    let now = 0;
    const index = new TaskIndex({ wallClock: () => now });
    index.reset([], [], 1n);
    index.takeReadied();
    const delayed = (taskId: string, queue: string, notBeforeMs: number, rev: bigint) =>
      entry({ ...record(taskId, `r-${taskId}`, queue), notBeforeMs }, rev);
    index.applyTask('b-late', delayed('b-late', 'beta', 5_000, 20n));
    index.applyTask('a-soon', delayed('a-soon', 'alpha', 1_000, 21n));
    index.applyTask('g-soon', delayed('g-soon', 'gamma', 1_000, 22n));
    expect(readied(index)).toEqual(none); // not grantable yet: nobody is woken for them
    expect(index.nextDueMs()).toBe(1_000);
    now = 999;
    index.promoteDue();
    expect(readied(index)).toEqual(none);
    now = 1_000;
    index.promoteDue();
    // Only the queues (and tasks) that came due.
    expect(readied(index)).toEqual({ queues: ['alpha', 'gamma'], tasks: ['a-soon', 'g-soon'] });
    expect(index.nextDueMs()).toBe(5_000);
    // A due task whose resource has an owner is promoted but not readied: the owner's delete readies it.
    index.applyOwner('r-b-late', { resource: 'r-b-late', taskId: 'x', sessionId: 's', requestId: 'q', token: 23n });
    now = 5_000;
    index.promoteDue();
    expect(readied(index)).toEqual(none);
    expect(index.nextDueMs()).toBeUndefined();
    index.applyOwner('r-b-late', undefined);
    expect(readied(index)).toEqual({ queues: ['beta'], tasks: ['b-late'] });
    expect(index.select({ queues: ['beta'] }).map((t) => t.taskId)).toEqual(['b-late']);
  });

  it('notes the queue of a resource whose hold ended when the watch reaches its revision', () => {
    const index = indexOfTable();
    index.takeReadied();
    index.hold('r-b1');
    index.holdUntil('r-b1', 30n);
    expect(index.select({ queues: ['beta'] })).toEqual([]);
    index.advanceTo(29n);
    expect(readied(index)).toEqual(none);
    index.advanceTo(30n);
    expect(readied(index)).toEqual({ queues: ['beta'], tasks: ['b1'] });
    expect(index.select({ queues: ['beta'] }).map((t) => t.taskId)).toEqual(['b1']);
  });

  it('counts tasks per queue by state, default always present', () => {
    const index = new TaskIndex({ wallClock: () => 1_000 });
    const delayed: TaskRecord = { ...record('a3', 'r-a3', 'alpha'), notBeforeMs: 5_000 };
    const done: TaskRecord = { ...record('b9', 'r-b9', 'beta'), state: 'completed' };
    const open: TaskRecord = {
      ...record('a4', 'r-a4', 'alpha'),
      attempts: 1,
      open: { attempt: 1, workerId: 'w', sessionId: 'a1', startedAtMs: 1 },
    };
    index.reset(
      [task('a1', 'alpha', 10n), entry(delayed, 11n), entry(done, 12n), entry(open, 13n, 14n)],
      [{ resource: 'r-a4', taskId: 'a4', sessionId: 'a1', requestId: 'q', token: 14n }],
      14n,
    );
    const zero = { pending: 0, delayed: 0, leased: 0, completed: 0, failed: 0, cancelled: 0 };
    expect(Object.fromEntries(index.queueCounts())).toEqual({
      default: zero,
      alpha: { ...zero, pending: 1, delayed: 1, leased: 1 },
      beta: { ...zero, completed: 1 },
    });
    // The queue is forgotten once it has nothing left.
    index.applyTask('b9', undefined);
    expect([...index.queueCounts().keys()]).toEqual(['default', 'alpha']);
  });
});
