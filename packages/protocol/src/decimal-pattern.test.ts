import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decimalRangePattern } from './decimal-pattern.js';
import { INT64_MAX } from './token.js';

describe('decimalRangePattern', () => {
  it.each([1n, 7n, 9n, 10n, 19n, 100n, 999n, 1000n, 4096n, INT64_MAX])(
    'matches exactly the decimals in range, max %s',
    (max) => {
      for (const min of [0n, 1n] as const) {
        const re = new RegExp(decimalRangePattern(max, min));
        const inRange = (text: string) => /^(0|[1-9][0-9]*)$/.test(text) && BigInt(text) >= min && BigInt(text) <= max;
        const around = [0n, 1n, 2n, max - 1n, max, max + 1n, max * 10n, max + 10n].filter((v) => v >= 0n);
        for (const v of around) expect(re.test(v.toString()), `${v} (min ${min})`).toBe(inRange(v.toString()));
        fc.assert(
          fc.property(
            fc.oneof(
              fc.bigInt({ min: 0n, max: max * 2n }).map(String),
              fc.stringMatching(/^[0-9]{1,21}$/),
              fc.string({ maxLength: 22 }),
            ),
            (text) => re.test(text) === inRange(text),
          ),
          { numRuns: 2_000 },
        );
      }
    },
  );
});
