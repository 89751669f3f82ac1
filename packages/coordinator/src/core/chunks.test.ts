import { describe, expect, it } from 'vitest';
import { chunks, chunksBy } from './chunks.js';

describe('chunks', () => {
  it.each([
    [[], 3, []],
    [[1, 2, 3], 3, [[1, 2, 3]]],
    [[1, 2, 3, 4, 5], 2, [[1, 2], [3, 4], [5]]],
  ])('%j in chunks of %i: %j (each item once, in order)', (items, size, expected) => {
    expect(chunks(items, size)).toEqual(expected);
  });
});

describe('chunksBy', () => {
  const w = (n: number) => n;
  it.each([
    ['by count', [1, 1, 1, 1, 1], 2, 100, [[1, 1], [1, 1], [1]]],
    ['by bytes', [4, 4, 4], 10, 8, [[4, 4], [4]]],
    ['one item over the bytes comes alone', [20, 1, 1], 10, 8, [[20], [1, 1]]],
    ['none', [], 2, 8, []],
  ])('%s', (_name, items, count, bytes, expected) => {
    expect(chunksBy(items, count, bytes, w)).toEqual(expected);
  });
});
