import { describe, expect, it } from 'vitest';
import { Slots, SlotsByKey } from './slots.js';

describe('Slots', () => {
  it('gives at most max at once; a release frees one, exactly once', () => {
    const slots = new Slots(2);
    const a = slots.tryTake();
    const b = slots.tryTake();
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    expect(slots.tryTake()).toBeUndefined();
    expect(slots.used).toBe(2);
    a?.release();
    a?.release(); // idempotent: the second release frees nothing
    expect(slots.used).toBe(1);
    expect(slots.tryTake()).toBeDefined();
    expect(slots.tryTake()).toBeUndefined();
  });

  it('a bound of 0 refuses everything', () => {
    expect(new Slots(0).tryTake()).toBeUndefined();
  });
});

describe('SlotsByKey', () => {
  it('counts each key on its own and forgets keys with nothing taken', () => {
    const slots = new SlotsByKey(1);
    const w1 = slots.tryTake('w1');
    expect(w1).toBeDefined();
    expect(slots.tryTake('w1')).toBeUndefined();
    const w2 = slots.tryTake('w2');
    expect(w2).toBeDefined();
    w1?.release();
    w1?.release();
    expect(slots.used('w1')).toBe(0);
    expect(slots.used('w2')).toBe(1);
    expect(slots.tryTake('w1')).toBeDefined();
    expect(slots.tryTake('w1')).toBeUndefined();
  });
});
