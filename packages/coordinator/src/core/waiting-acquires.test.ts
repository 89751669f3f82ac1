import { describe, expect, it } from 'vitest';
import { WaitingAcquires, type WakeUp } from './waiting-acquires.js';

const waiter = (): WakeUp => () => undefined;

describe('WaitingAcquires', () => {
  it('wakes the oldest waiting acquire of each readied queue, with that queue as its baton', () => {
    const w = new WaitingAcquires();
    const [a1, a2, b1] = [waiter(), waiter(), waiter()];
    w.add(a1, ['a'], false);
    w.add(a2, ['a'], false);
    w.add(b1, ['b'], false);
    expect(w.wakesFor(new Set(['a']))).toEqual([[a1, 'a']]);
    expect(w.wakesFor(new Set(['a', 'b']))).toEqual([
      [a1, 'a'],
      [b1, 'b'],
    ]);
    expect(w.wakesFor(new Set(['c']))).toEqual([]);
  });

  it('starts each readied queue its own chain, with distinct acquires while there are enough', () => {
    const w = new WaitingAcquires();
    const [ab, b] = [waiter(), waiter()];
    w.add(ab, ['a', 'b'], false);
    w.add(b, ['b'], false);
    expect(w.wakesFor(new Set(['a', 'b']))).toEqual([
      [ab, 'a'],
      [b, 'b'],
    ]);
  });

  it('passes a chain to the next oldest acquire of its queue once one stopped waiting', () => {
    const w = new WaitingAcquires();
    const [a1, a2, ab] = [waiter(), waiter(), waiter()];
    w.add(a1, ['a'], false);
    w.add(ab, ['b', 'a'], false);
    w.add(a2, ['a'], false);
    expect(w.next('a')).toBe(a1);
    w.remove(a1);
    w.remove(a1); // idempotent
    expect(w.next('a')).toBe(ab);
    w.remove(ab);
    expect([w.next('a'), w.next('b'), w.size]).toEqual([a2, undefined, 1]);
  });

  it('wakes an acquire of one task id at every change of its queues, never as part of a chain', () => {
    const w = new WaitingAcquires();
    const [one, plain] = [waiter(), waiter()];
    w.add(one, ['a'], true);
    w.add(plain, ['a'], false);
    expect(w.wakesFor(new Set(['a']))).toEqual([
      [plain, 'a'],
      [one, undefined],
    ]);
    w.remove(plain);
    expect(w.next('a')).toBeUndefined();
    expect(w.wakesFor(new Set(['a']))).toEqual([[one, undefined]]);
    expect(w.wakesFor(new Set(['b']))).toEqual([]);
  });

  it("wakes every acquire, with no baton, when the change is 'all'", () => {
    const w = new WaitingAcquires();
    const [a, b] = [waiter(), waiter()];
    w.add(a, ['a'], false);
    w.add(b, ['b'], true);
    expect(w.wakesFor('all')).toEqual([
      [a, undefined],
      [b, undefined],
    ]);
    expect(w.all()).toEqual([a, b]);
  });
});
