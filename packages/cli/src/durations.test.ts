import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './durations.js';

describe('parseDuration', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['5m', 300_000],
    ['2h', 7_200_000],
    ['7d', 604_800_000],
    ['1h30m', 5_400_000],
    ['1d2h3m4s5ms', 93_784_005],
    ['1.5s', 1_500],
    ['250', 250],
    [' 10s ', 10_000],
    ['0s', 0],
  ])('%s is %i ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', 's', '10x', '-5s', '1s1s', '30m1h', '1 h', '1h 30m', '5sec', '1e3s', '99999999999999999d'])(
    '%j is not a duration',
    (text) => {
      expect(parseDuration(text)).toBeUndefined();
    },
  );

  it('reads back what formatDuration writes, within its rounding (one decimal of the largest unit)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 * 86_400_000 }), (ms) => {
        const back = parseDuration(formatDuration(ms));
        expect(back).toBeDefined();
        expect(Math.abs((back ?? 0) - ms)).toBeLessThanOrEqual(Math.max(0.5, ms * 0.05));
      }),
    );
    expect(parseDuration(formatDuration(604_800_000))).toBe(604_800_000);
  });
});

describe('formatDuration', () => {
  it.each([
    [0, '0ms'],
    [850, '850ms'],
    [1_500, '1.5s'],
    [12_000, '12s'],
    [240_000, '4m'],
    [5_400_000, '1.5h'],
    [604_800_000, '7d'],
    [-2_000, '-2s'],
  ])('%i ms is %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });
});
