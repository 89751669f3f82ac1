import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { entryOf, recordOf, TaskIndex, type EndedTask, type PendingTask, type TaskEntry } from './task-index.js';
import type { TaskRecord } from './task-record.js';

/** The index entry of `record` as the watch feed makes it. */
function entry(record: TaskRecord, createRevision: bigint, modRevision = createRevision): TaskEntry {
  return entryOf({ record, value: JSON.stringify(record), createRevision, modRevision }, DEFAULT_RETRY_POLICY);
}

const pendingRecord = (taskId: string, resource: string): TaskRecord => ({
  v: 2,
  taskId,
  resource,
  payloadBytes: 4,
  payloadDigest: 'd',
  state: 'pending',
  attempts: 0,
});

const task = (taskId: string, resource: string, rev: bigint): PendingTask =>
  entry(pendingRecord(taskId, resource), rev) as PendingTask;

describe('TaskIndex', () => {
  it('selects pending tasks oldest first, one per resource', () => {
    const index = new TaskIndex();
    index.reset([task('c', 'r2', 12n), task('a', 'r1', 10n), task('b', 'r1', 11n)], [], 12n);
    expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['a', 'c']);
    expect(index.select().map((t) => t.taskId)).toEqual(['a']);
  });

  it('skips resources that have an owner, and returns when the owner goes', () => {
    const index = new TaskIndex();
    index.reset([task('a', 'r1', 10n), task('b', 'r2', 11n)], [], 11n);
    index.applyOwner('r1', { resource: 'r1', taskId: 'a', sessionId: 's', requestId: 'q', token: 13n });
    expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['b']);
    index.applyOwner('r1', undefined);
    expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['a', 'b']);
  });

  it("lists a session's owner keys (what its end deletes without a read)", () => {
    const index = new TaskIndex();
    index.reset([], [{ resource: 'r1', taskId: 'a', sessionId: 's1', requestId: 'q', token: 5n }], 5n);
    index.applyOwner('r2', { resource: 'r2', taskId: 'b', sessionId: 's2', requestId: 'q', token: 6n });
    index.applyOwner('r3', { resource: 'r3', taskId: 'c', sessionId: 's1', requestId: 'q', token: 7n });
    expect(index.ownersOf('s1').map((o) => [o.resource, o.token])).toEqual([
      ['r1', 5n],
      ['r3', 7n],
    ]);
    index.applyOwner('r1', undefined);
    expect(index.ownersOf('s1').map((o) => o.resource)).toEqual(['r3']);
    expect(index.ownersOf('nobody')).toEqual([]);
  });

  it('frees an owner ahead of the watch and still says whose it was until the watch gets there', () => {
    const index = new TaskIndex();
    const owner = { resource: 'r1', taskId: 'a', sessionId: 's1', requestId: 'q', token: 5n };
    index.reset([task('a', 'r1', 4n)], [owner], 5n);
    index.freeOwner('r1', 4n, 9n); // another token: not ours to free
    expect(index.ownerOf('r1')).toEqual(owner);
    index.freeOwner('r1', 5n, 9n);
    expect(index.ownerOf('r1')).toBeUndefined();
    expect(index.select().map((t) => t.taskId)).toEqual(['a']);
    expect(index.previousOwner('r1')).toEqual(owner);
    index.advanceTo(8n);
    expect(index.previousOwner('r1')).toEqual(owner);
    index.advanceTo(9n);
    expect(index.previousOwner('r1')).toBeUndefined();
  });

  it('drops tasks that stop being pending', () => {
    const index = new TaskIndex();
    index.reset([task('a', 'r1', 10n)], [], 10n);
    index.applyTask('a', undefined);
    expect(index.select()).toEqual([]);
    expect(index.stats()).toEqual({
      pending: 0,
      delayed: 0,
      parked: 0,
      owned: 0,
      held: 0,
      ended: { completed: 0, failed: 0, cancelled: 0 },
    });
  });

  it('selects a named task only when it is eligible', () => {
    const index = new TaskIndex();
    index.reset([task('a', 'r1', 10n), task('b', 'r2', 11n)], [], 11n);
    expect(index.select({ taskId: 'b' }).map((t) => t.taskId)).toEqual(['b']);
    expect(index.select({ taskId: 'zz' })).toEqual([]);
    index.hold('r2');
    expect(index.select({ taskId: 'b' })).toEqual([]);
  });

  // Holds: [action, index revision after, held?]
  it('holds a resource until released or until the index has seen the settling revision', () => {
    const index = new TaskIndex();
    index.reset([task('a', 'r1', 10n)], [], 10n);
    index.hold('r1');
    expect(index.isHeld('r1')).toBe(true);
    expect(index.select()).toEqual([]);
    index.holdUntil('r1', 15n);
    expect(index.isHeld('r1')).toBe(true);
    index.advanceTo(14n);
    expect(index.isHeld('r1')).toBe(true);
    index.advanceTo(15n);
    expect(index.isHeld('r1')).toBe(false);
    index.holdUntil('r1', 0n);
    expect(index.isHeld('r1')).toBe(false);
  });

  it('never moves its revision backwards and keeps holds across a reset', () => {
    const index = new TaskIndex();
    index.advanceTo(20n);
    index.advanceTo(5n);
    expect(index.revision).toBe(20n);
    index.hold('r1');
    index.reset([task('a', 'r1', 10n)], [], 30n);
    expect(index.revision).toBe(30n);
    expect(index.isHeld('r1')).toBe(true);
  });

  describe('lifecycle', () => {
    const at = (t: PendingTask, record: Partial<TaskRecord>, rev: bigint): PendingTask =>
      entry({ ...recordOf(t), ...record }, t.createRevision, rev) as PendingTask;
    const OPEN = { attempt: 1, workerId: 'w', sessionId: 's', startedAtMs: 0 };

    it('keeps a delayed task out until its time, and says when that is', () => {
      let now = 1_000;
      const index = new TaskIndex({ wallClock: () => now });
      const a = task('a', 'r1', 10n);
      index.reset([at(a, { notBeforeMs: 1_500 }, 10n), task('b', 'r2', 11n)], [], 11n);
      expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['b']);
      expect(index.nextDueMs()).toBe(1_500);
      now = 1_500;
      expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['a', 'b']);
      expect(index.nextDueMs()).toBeUndefined();
    });

    it('still reports a due time that passed after the last select (only select promotes)', () => {
      let now = 1_000;
      const index = new TaskIndex({ wallClock: () => now });
      const a = task('a', 'r1', 10n);
      index.reset([at(a, { notBeforeMs: 1_500 }, 10n)], [], 10n);
      expect(index.select({ limit: 10 })).toEqual([]);
      now = 1_600;
      // A caller that selected at 1 000 must not be told "nothing is due": it would wait past 'a'.
      expect(index.nextDueMs()).toBe(1_500);
      expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['a']);
      expect(index.nextDueMs()).toBeUndefined();
    });

    it('a delayed task whose attempt opened is not promoted by its old due time', () => {
      let now = 1_000;
      const index = new TaskIndex({ wallClock: () => now });
      const a = task('a', 'r1', 10n);
      index.reset([at(a, { notBeforeMs: 1_500 }, 10n)], [], 10n);
      index.applyTask('a', at(a, { notBeforeMs: 1_500, open: OPEN }, 12n));
      now = 2_000;
      expect(index.select()).toEqual([]);
      expect(index.stats()).toMatchObject({ delayed: 0, parked: 1 });
    });

    it('orders by priority, then age; an attempt open or used up parks the task', () => {
      const index = new TaskIndex({ wallClock: () => 0 });
      index.reset(
        [
          task('old-low', 'r1', 10n),
          at(task('new-high', 'r2', 11n), { priority: 7 }, 11n),
          at(task('open', 'r3', 12n), { priority: 9, open: OPEN }, 12n),
          at(task('spent', 'r4', 13n), { priority: 9, attempts: 5 }, 13n),
        ],
        [],
        13n,
      );
      expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['new-high', 'old-low']);
    });

    it('finds lost attempts: an open attempt whose owner key is gone', () => {
      const index = new TaskIndex({ wallClock: () => 0 });
      const owner = { resource: 'r1', taskId: 'a', sessionId: 's', requestId: 'q', token: 12n };
      index.reset([at(task('a', 'r1', 10n), { open: OPEN }, 12n)], [owner], 12n);
      expect(index.lostAttempts()).toEqual([]);
      index.applyOwner('r1', undefined);
      expect(index.lostAttempts().map((t) => t.taskId)).toEqual(['a']);
    });
  });

  describe('ended tasks', () => {
    const ended = (taskId: string, state: EndedTask['state'], endedAtMs: number, rev: bigint): TaskEntry =>
      entry({ ...pendingRecord(taskId, `r-${taskId}`), state, endedAtMs, atMs: endedAtMs }, rev);

    it('counts ended tasks by state and keeps what retention needs; a retry or a delete drops them', () => {
      const index = new TaskIndex();
      index.reset([ended('a', 'completed', 5, 10n), ended('b', 'failed', 6, 11n), task('c', 'r1', 12n)], [], 12n);
      expect(index.stats().ended).toEqual({ completed: 1, failed: 1, cancelled: 0 });
      expect(index.endedTask('b')).toEqual({
        state: 'failed',
        taskId: 'b',
        queue: 'default',
        modRevision: 11n,
        endedAtMs: 6,
        payloadBytes: 4,
        keep: undefined,
      });
      // Retried: pending again, no longer ended.
      index.applyTask('b', entry(pendingRecord('b', 'r-b'), 11n, 13n));
      expect(index.stats().ended).toEqual({ completed: 1, failed: 0, cancelled: 0 });
      expect(index.select({ limit: 10 }).map((t) => t.taskId)).toEqual(['b', 'c']);
      // Completed, then removed.
      index.applyTask('c', ended('c', 'completed', 9, 14n));
      expect(index.stats()).toMatchObject({ pending: 1, ended: { completed: 2 } });
      index.applyTask('a', undefined);
      index.applyTask('c', undefined);
      expect(index.stats().ended).toEqual({ completed: 0, failed: 0, cancelled: 0 });
      expect([...index.endedTasks()]).toEqual([]);
    });

    it('forgets a task this coordinator deleted only at the revision its delete compared (applyOwnDelete)', () => {
      const index = new TaskIndex();
      index.reset([ended('a', 'cancelled', 5, 10n), ended('b', 'cancelled', 6, 11n)], [], 11n);
      // The watch was faster: 'a' was submitted again (pending, rev 14) after the delete at rev 12.
      index.applyTask('a', entry(pendingRecord('a', 'r-a'), 14n));
      expect(index.applyOwnDelete('a', 10n)).toBe(false);
      expect(index.pendingTask('a')?.modRevision).toBe(14n);
      expect(index.applyOwnDelete('b', 9n)).toBe(false);
      expect(index.endedTask('b')).toBeDefined();
      expect(index.applyOwnDelete('b', 11n)).toBe(true);
      expect(index.endedTask('b')).toBeUndefined();
      expect(index.stats().ended).toEqual({ completed: 0, failed: 0, cancelled: 0 });
    });

    it("keeps the task's own retention for the state it ended in", () => {
      const index = new TaskIndex();
      const own = { ...pendingRecord('a', 'r'), state: 'failed' as const, retention: { failed: null, completed: 5 } };
      index.applyTask('a', entry(own, 3n));
      expect(index.endedTask('a')?.keep).toBeNull();
    });
  });

  it('a pending entry keeps only the lean fields and the stored JSON, never a parsed record', () => {
    const record = { ...pendingRecord('a', 'r1'), priority: 3, notBeforeMs: 7 };
    const e = entry(record, 2n) as PendingTask;
    // Own fields: the lean ones, and the index's bookkeeping (flags are packed, state on the prototype).
    expect(Object.keys(e).sort()).toEqual(
      [
        'createRevision',
        'dueGen',
        'dueMs',
        'modRevision',
        'payloadBytes',
        'priority',
        'queue',
        'raw',
        'resource',
        'seq',
        'status',
        'taskId',
      ].sort(),
    );
    expect(e.state).toBe('pending');
    expect(recordOf(e)).toEqual(record);
    expect(e).toMatchObject({ priority: 3, dueMs: 7, open: false, exhausted: false, legacy: false });
  });

  it('parks a record of layout v1 (never granted before it is converted)', () => {
    const index = new TaskIndex();
    const record = pendingRecord('old', 'r1');
    index.applyTask(
      'old',
      entryOf(
        {
          record,
          value: '{"v":1}',
          legacy: { payload: 1, payloadJson: '1', history: [] },
          createRevision: 3n,
          modRevision: 3n,
        },
        DEFAULT_RETRY_POLICY,
      ),
    );
    expect(index.select()).toEqual([]);
    expect(index.stats()).toMatchObject({ pending: 1, parked: 1 });
    expect(index.lostAttempts()).toEqual([]);
  });
});
