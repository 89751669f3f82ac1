import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_JSON_LIMITS, jsonLimitProblem } from './json-limits.js';

const nest = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;

describe('jsonLimitProblem', () => {
  it('allows nesting up to the limit and refuses one level more, without recursion', () => {
    expect(jsonLimitProblem(nest(64))).toBeUndefined();
    expect(jsonLimitProblem(nest(65))).toMatch(/nested deeper than 64/);
    expect(jsonLimitProblem(`{"a":${nest(63)}}`)).toBeUndefined();
    expect(jsonLimitProblem(`{"a":${nest(64)}}`)).toMatch(/deeper/);
    // 100k levels: answered by the scan (a recursive walker would overflow the stack).
    expect(jsonLimitProblem(nest(100_000))).toMatch(/deeper/);
  });

  it('ignores brackets, commas and digits inside strings (escapes included)', () => {
    expect(
      jsonLimitProblem(JSON.stringify({ s: '[[[[[[[[' + ']'.repeat(100) + ',,,,9007199254740993 \\" ["' }), {
        maxDepth: 1,
        maxEntries: 10,
      }),
    ).toBeUndefined();
  });

  it('counts entries per container', () => {
    const arr = (k: number) => JSON.stringify(Array.from({ length: k }, (_, i) => i));
    expect(jsonLimitProblem(arr(10_000))).toBeUndefined();
    expect(jsonLimitProblem(arr(10_001))).toMatch(/more than 10000 entries/);
    const obj = (k: number) => JSON.stringify(Object.fromEntries(Array.from({ length: k }, (_, i) => [`k${i}`, i])));
    expect(jsonLimitProblem(obj(3), { maxDepth: 5, maxEntries: 3 })).toBeUndefined();
    expect(jsonLimitProblem(obj(4), { maxDepth: 5, maxEntries: 3 })).toMatch(/more than 3/);
    expect(jsonLimitProblem('[[1,2,3],[1,2,3]]', { maxDepth: 5, maxEntries: 3 })).toBeUndefined();
  });

  it('refuses integers JSON.parse would round, accepts safe ones and fractions', () => {
    expect(jsonLimitProblem('{"n":9007199254740991}')).toBeUndefined();
    expect(jsonLimitProblem('{"n":-9007199254740991}')).toBeUndefined();
    expect(jsonLimitProblem('{"n":9007199254740993}')).toMatch(/beyond 2\^53/);
    expect(jsonLimitProblem('[1e300]')).toMatch(/beyond 2\^53/);
    expect(jsonLimitProblem('[0.5, -1.25e-3, 3.14159]')).toBeUndefined();
  });

  it('agrees with a recursive reference on generated JSON', () => {
    const depth = (v: unknown): number =>
      v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v).map(depth)) : 0;
    const unsafe = (v: unknown): boolean =>
      typeof v === 'number'
        ? Number.isInteger(v) && !Number.isSafeInteger(v)
        : v !== null && typeof v === 'object' && Object.values(v).some(unsafe);
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const text = JSON.stringify(value);
        const problem = jsonLimitProblem(text, { maxDepth: 4, maxEntries: DEFAULT_JSON_LIMITS.maxEntries });
        const expected = depth(value) > 4 || unsafe(JSON.parse(text));
        return (problem !== undefined) === expected;
      }),
      { numRuns: 2_000 },
    );
  });
});
