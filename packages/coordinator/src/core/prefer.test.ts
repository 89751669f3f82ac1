import { describe, expect, it } from 'vitest';
import { prefersMinimalReturn } from './prefer.js';

describe('prefersMinimalReturn (RFC 7240 Prefer)', () => {
  it.each([
    ['return=minimal', true],
    ['RETURN=Minimal', true],
    [' respond-async, return=minimal ; foo=bar', true],
    ['return="minimal"', true],
    ['return=representation', false],
    ['minimal', false],
    ['returns=minimal', false],
    ['', false],
  ])('%j -> %s', (header, expected) => {
    expect(prefersMinimalReturn(header)).toBe(expected);
  });

  it('reads every header line, and nothing without one', () => {
    expect(prefersMinimalReturn(['wait=10', 'return=minimal'])).toBe(true);
    expect(prefersMinimalReturn(['wait=10'])).toBe(false);
    expect(prefersMinimalReturn(undefined)).toBe(false);
  });
});
