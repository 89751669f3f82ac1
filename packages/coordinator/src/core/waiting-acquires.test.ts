import { describe, expect, it } from 'vitest';
import type { Readied } from './task-index.js';
import { WaitingAcquires, type WakeUp } from './waiting-acquires.js';

const waiter = (): WakeUp => () => undefined;
/** A change that readied these queues, and these tasks of theirs ('all': any of their tasks). */
const change = (queues: string[] | 'all', tasks: string[] | 'all' = []): Readied => ({
  queues: queues === 'all' ? 'all' : new Set(queues),
  tasks: tasks === 'all' ? 'all' : new Set(tasks),
});

describe('WaitingAcquires', () => {
  it('wakes the oldest waiting acquire of each readied queue, with that queue as its baton', () => {
    const w = new WaitingAcquires();
    const [a1, a2, b1] = [waiter(), waiter(), waiter()];
    w.add(a1, ['a']);
    w.add(a2, ['a']);
    w.add(b1, ['b']);
    expect(w.wakesFor(change(['a']))).toEqual([[a1, 'a']]);
    expect(w.wakesFor(change(['a', 'b']))).toEqual([
      [a1, 'a'],
      [b1, 'b'],
    ]);
    expect(w.wakesFor(change(['c']))).toEqual([]);
  });

  it('starts each readied queue its own chain, with distinct acquires while there are enough', () => {
    const w = new WaitingAcquires();
    const [ab, b] = [waiter(), waiter()];
    w.add(ab, ['a', 'b']);
    w.add(b, ['b']);
    expect(w.wakesFor(change(['a', 'b']))).toEqual([
      [ab, 'a'],
      [b, 'b'],
    ]);
  });

  it('passes a chain to the next oldest acquire of its queue once one stopped waiting', () => {
    const w = new WaitingAcquires();
    const [a1, a2, ab] = [waiter(), waiter(), waiter()];
    w.add(a1, ['a']);
    w.add(ab, ['b', 'a']);
    w.add(a2, ['a']);
    expect(w.next('a')).toBe(a1);
    w.remove(a1);
    w.remove(a1); // idempotent
    expect(w.next('a')).toBe(ab);
    w.remove(ab);
    expect([w.next('a'), w.next('b'), w.size]).toEqual([a2, undefined, 1]);
  });

  it('wakes an acquire of one task id when that task was readied, never as part of a chain', () => {
    const w = new WaitingAcquires();
    const [one, other, plain, twin] = [waiter(), waiter(), waiter(), waiter()];
    w.add(one, ['a'], 't1');
    w.add(other, ['a'], 't2');
    w.add(plain, ['a']);
    w.add(twin, ['a'], 't1');
    expect(w.wakesFor(change(['a'], ['t1']))).toEqual([
      [plain, 'a'],
      [one, undefined],
      [twin, undefined],
    ]);
    // Another task of its queue readied: the chain wakes, the acquires of t1 and t2 do not.
    expect(w.wakesFor(change(['a'], ['t3']))).toEqual([[plain, 'a']]);
    w.remove(plain);
    expect(w.next('a')).toBeUndefined();
    expect(w.wakesFor(change(['a'], ['t2']))).toEqual([[other, undefined]]);
    w.remove(one);
    w.remove(twin);
    expect(w.wakesFor(change(['a'], ['t1']))).toEqual([]);
  });

  it("wakes every acquire of one task id serving a readied queue when the tasks are 'all'", () => {
    const w = new WaitingAcquires();
    const [a1, a2, b1] = [waiter(), waiter(), waiter()];
    w.add(a1, ['a'], 't1');
    w.add(a2, ['a'], 't2');
    w.add(b1, ['b'], 't3');
    expect(w.wakesFor(change(['a'], 'all'))).toEqual([
      [a1, undefined],
      [a2, undefined],
    ]);
  });

  it("wakes every acquire, with no baton, when the change is 'all'", () => {
    const w = new WaitingAcquires();
    const [a, b] = [waiter(), waiter()];
    w.add(a, ['a']);
    w.add(b, ['b'], 't1');
    expect(w.wakesFor(change('all', ['nothing']))).toEqual([
      [a, undefined],
      [b, undefined],
    ]);
    expect(w.all()).toEqual([a, b]);
  });
});
