import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { backoffCeilingMs, backoffDelayMs, type BackoffOptions } from './backoff.js';
import { retryDelayMs } from './model/retry-policy.js';

const at = (r: number) => () => r;

describe('backoffDelayMs', () => {
  const base: BackoffOptions = { initialMs: 100, maxMs: 1_000 };
  // attempt, options, random -> delay
  const table: [string, number, BackoffOptions, number, number][] = [
    ['full jitter, r = 0: the whole ceiling', 0, base, 0, 100],
    ['full jitter, r → 1: nearly nothing', 0, base, 0.999, 0],
    ['full jitter, halfway', 0, base, 0.5, 50],
    ['the ceiling doubles per attempt', 3, base, 0, 800],
    ['and is capped at maxMs', 4, base, 0, 1_000],
    ['capped far out (no Infinity, no NaN)', 5_000, base, 0, 1_000],
    ['full jitter under the cap', 10, base, 0.25, 750],
    ['no jitter: deterministic', 2, { ...base, jitter: 0 }, 0.9, 400],
    ['equal jitter: [ceiling/2, ceiling]', 2, { ...base, jitter: 0.5 }, 0.999, 200],
    ['multiplier 3', 2, { ...base, multiplier: 3 }, 0, 900],
    ['multiplier 1: constant', 7, { ...base, multiplier: 1 }, 0, 100],
    ['a random source above 1 is clamped', 0, base, 7, 0],
    ['a random source below 0 is clamped', 0, base, -3, 100],
    ['NaN from the random source counts as 0', 0, base, Number.NaN, 100],
    ['a negative attempt counts as 0', -4, base, 0, 100],
    ['initial above max: max', 0, { initialMs: 5_000, maxMs: 1_000 }, 0, 1_000],
  ];
  it.each(table)('%s', (_name, attempt, options, r, expected) => {
    expect(backoffDelayMs(attempt, options, at(r))).toBe(expected);
  });

  const options = fc.record({
    initialMs: fc.integer({ min: 0, max: 100_000 }),
    maxMs: fc.integer({ min: 0, max: 10_000_000 }),
    multiplier: fc.double({ min: 1, max: 100, noNaN: true }),
    jitter: fc.double({ min: 0, max: 1, noNaN: true }),
  });
  const attempt = fc.integer({ min: 0, max: 2_000 });
  const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

  it('property: a whole number within [ceiling · (1 − jitter), ceiling] (rounded), never above maxMs', () => {
    fc.assert(
      fc.property(attempt, options, random, (n, o, r) => {
        const d = backoffDelayMs(n, o, at(r));
        const ceiling = backoffCeilingMs(n, o);
        expect(Number.isInteger(d)).toBe(true);
        expect(d).toBeGreaterThanOrEqual(Math.floor(ceiling * (1 - o.jitter)) - 1);
        expect(d).toBeLessThanOrEqual(Math.round(ceiling));
        expect(d).toBeLessThanOrEqual(o.maxMs);
        expect(d).toBeGreaterThanOrEqual(0);
      }),
    );
  });

  it('property: the ceiling never shrinks from one attempt to the next', () => {
    fc.assert(
      fc.property(attempt, options, (n, o) => {
        expect(backoffCeilingMs(n + 1, o)).toBeGreaterThanOrEqual(backoffCeilingMs(n, o));
      }),
    );
  });

  it('property: full jitter covers the whole range — r = 0 gives the ceiling, r → 1 nearly 0', () => {
    fc.assert(
      fc.property(attempt, options, (n, o) => {
        const full = { ...o, jitter: 1 };
        expect(backoffDelayMs(n, full, at(0))).toBe(Math.round(backoffCeilingMs(n, full)));
        expect(backoffDelayMs(n, full, at(1 - 1e-12))).toBeLessThanOrEqual(1);
      }),
    );
  });

  it("property: the task retry policy's retryDelayMs is this backoff at attempt n − 1", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2_000 }), options, random, (n, o, r) => {
        expect(retryDelayMs(o, n, at(r))).toBe(backoffDelayMs(n - 1, o, at(r)));
      }),
    );
  });
});
