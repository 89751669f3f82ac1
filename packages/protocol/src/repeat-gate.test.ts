import { describe, expect, it } from 'vitest';
import { RepeatGate } from './repeat-gate.js';

describe('RepeatGate', () => {
  it('logs the first occurrence, counts repeats for the window, then logs again with the count', () => {
    const gate = new RepeatGate(1_000);
    expect(gate.note('k', 0)).toEqual({ log: true, suppressed: 0 });
    expect(gate.note('k', 10).log).toBe(false);
    expect(gate.note('k', 999)).toEqual({ log: false, suppressed: 2 });
    expect(gate.note('other', 999).log).toBe(true);
    expect(gate.note('k', 1_000)).toEqual({ log: true, suppressed: 2 });
    expect(gate.note('k', 1_001)).toEqual({ log: false, suppressed: 1 });
    expect(gate.clear('k')).toBe(1);
    expect(gate.note('k', 1_002)).toEqual({ log: true, suppressed: 0 });
  });
});
