import { describe, expect, it } from 'vitest';
import { createKeyRing, parseBearer } from './bearer.js';

describe('bearer keys', () => {
  it('matches any configured key and nothing else', () => {
    const ring = createKeyRing(['first-key-0123456789', 'second-key-0123456789']);
    expect(ring('second-key-0123456789')).toBe(true);
    expect(ring('second-key-012345678')).toBe(false);
    expect(ring(undefined)).toBe(false);
    expect(createKeyRing([])('anything')).toBe(false);
  });

  it.each([
    ['Bearer abc', 'abc'],
    ['bearer  abc ', 'abc'],
    ['Basic abc', undefined],
    ['Bearer', undefined],
    ['Bearer a b', undefined],
  ])('parses %j', (header, key) => {
    expect(parseBearer(header)).toBe(key);
  });

  it('ignores repeated headers', () => {
    expect(parseBearer(['Bearer a', 'Bearer b'])).toBeUndefined();
  });
});
