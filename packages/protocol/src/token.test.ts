import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  compareTokens,
  FenceSchema,
  formatToken,
  INT64_MAX,
  parseFence,
  parseToken,
  TokenFormatError,
  TokenSchema,
} from './token.js';

describe('FencingToken', () => {
  it.each([
    ['1', 1n],
    ['42', 42n],
    ['9007199254740993', 9007199254740993n], // 2^53 + 1: would be corrupted by Number
    ['9223372036854775807', INT64_MAX],
  ])('parses %s exactly as a bigint', (text, value) => {
    expect(parseToken(text)).toBe(value);
    expect(formatToken(value)).toBe(text);
    expect(TokenSchema.safeParse(text).success).toBe(true);
  });

  it.each([
    '0',
    '-1',
    '+1',
    '01',
    '1.0',
    '1e3',
    ' 1',
    '1 ',
    '',
    'abc',
    '0x10',
    '9223372036854775808',
    '99999999999999999999',
  ])('rejects %j as a token', (text) => {
    expect(() => parseToken(text)).toThrow(TokenFormatError);
    expect(TokenSchema.safeParse(text).success).toBe(false);
  });

  it('allows 0 as a fence (never advanced) but not as a token', () => {
    expect(parseFence('0')).toBe(0n);
    expect(FenceSchema.safeParse('0').success).toBe(true);
    expect(TokenSchema.safeParse('0').success).toBe(false);
  });

  it('rejects non-strings on the wire', () => {
    expect(TokenSchema.safeParse(5).success).toBe(false);
    expect(TokenSchema.safeParse(5n).success).toBe(false);
  });

  it('compares numerically, not lexically', () => {
    expect(compareTokens('9', '10')).toBe(-1);
    expect(compareTokens('9007199254740993', '9007199254740992')).toBe(1);
    expect(compareTokens(7n, '7')).toBe(0);
  });

  it('round-trips every int64 token', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: INT64_MAX }), (v) => {
        expect(parseToken(formatToken(v))).toBe(v);
      }),
    );
  });
});
