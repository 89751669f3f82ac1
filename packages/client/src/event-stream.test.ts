import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { reconnectDelayMs } from './event-stream.js';

describe('reconnectDelayMs (full jitter)', () => {
  it('draws from [0, min(max, initial · 2^n)]', () => {
    fc.assert(
      fc.property(fc.nat(40), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (n, r) => {
        const delay = reconnectDelayMs(n, { initialMs: 100, maxMs: 5_000 }, () => r);
        expect(delay).toBeGreaterThanOrEqual(0);
        expect(delay).toBeLessThanOrEqual(Math.min(5_000, 100 * 2 ** n));
      }),
    );
    expect(reconnectDelayMs(0, { initialMs: 100 }, () => 0.999)).toBe(100);
    expect(reconnectDelayMs(3, { initialMs: 100 }, () => 0.5)).toBe(400);
    expect(reconnectDelayMs(50, { initialMs: 100, maxMs: 5_000 }, () => 0.999)).toBe(4995);
    expect(reconnectDelayMs(2, {}, () => 0)).toBe(0);
  });
});
