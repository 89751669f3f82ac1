import { describe, expect, it } from 'vitest';
import { TaskIndex, type PendingTask } from './task-index.js';

const task = (taskId: string, resource: string, rev: bigint): PendingTask => ({
  taskId,
  resource,
  createRevision: rev,
  modRevision: rev,
  record: { v: 1, taskId, resource, payload: null, state: 'pending', attempts: 0 },
});

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
    expect(index.stats()).toEqual({ pending: 0, delayed: 0, parked: 0, owned: 0, held: 0 });
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
    const at = (t: PendingTask, record: Partial<PendingTask['record']>, rev: bigint): PendingTask => ({
      ...t,
      modRevision: rev,
      record: { ...t.record, ...record },
    });
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
});
