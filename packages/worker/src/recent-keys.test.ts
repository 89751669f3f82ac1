import { describe, expect, it } from 'vitest';
import { RecentKeys } from './recent-keys.js';

describe('RecentKeys', () => {
  it('remembers the last max keys and forgets the oldest first', () => {
    const keys = new RecentKeys(3);
    for (const k of ['a', 'b', 'c', 'd']) keys.add(k);
    expect(keys.size).toBe(3);
    expect(keys.has('a')).toBe(false);
    expect(['b', 'c', 'd'].every((k) => keys.has(k))).toBe(true);
  });

  it('stays bounded however many keys pass through', () => {
    const keys = new RecentKeys(100);
    for (let i = 0; i < 100_000; i += 1) keys.add(`r${i}@${i}`);
    expect(keys.size).toBe(100);
    expect(keys.has('r99999@99999')).toBe(true);
    expect(keys.has('r0@0')).toBe(false);
  });

  it('adding a held key again changes nothing', () => {
    const keys = new RecentKeys(2);
    keys.add('a');
    keys.add('b');
    keys.add('a');
    expect(keys.has('a') && keys.has('b')).toBe(true);
  });

  it('refuses a bound that is not a positive integer', () => {
    expect(() => new RecentKeys(0)).toThrow(RangeError);
  });
});
