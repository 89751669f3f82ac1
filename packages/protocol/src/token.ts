/**
 * Fencing tokens.
 *
 * A token is an etcd revision: a positive int64. In memory it is a `bigint`; on the wire, in JSON
 * and in logs it is a decimal string. It is never a JavaScript `number` (revisions pass 2^53).
 *
 * A *fence* is the highest token a write target has accepted an advance to. A fence of 0 means
 * "never advanced"; tokens themselves are always >= 1.
 */
import { z } from 'zod';
import { decimalRangePattern } from './decimal-pattern.js';

/** Largest value an etcd revision (int64) can take. */
export const INT64_MAX = 9_223_372_036_854_775_807n;

export type FencingToken = bigint;

const DECIMAL = /^(0|[1-9][0-9]{0,18})$/;

export class TokenFormatError extends Error {
  override readonly name = 'TokenFormatError';
  readonly code = 'INVALID_TOKEN';
}

/** Parse a decimal string (fence or token) into a bigint in [0, INT64_MAX]. */
export function parseFence(text: string): bigint {
  if (!DECIMAL.test(text)) {
    throw new TokenFormatError(
      `not a non-negative decimal integer without sign or leading zeros: ${JSON.stringify(text)}`,
    );
  }
  const value = BigInt(text);
  if (value > INT64_MAX) throw new TokenFormatError(`exceeds int64 max: ${text}`);
  return value;
}

/** Parse a decimal string into a token: like {@link parseFence} but must be >= 1. */
export function parseToken(text: string): FencingToken {
  const value = parseFence(text);
  if (value < 1n) throw new TokenFormatError('a fencing token must be positive');
  return value;
}

/** Decimal string form of a token or fence for the wire. */
export function formatToken(token: bigint): string {
  if (token < 0n || token > INT64_MAX) throw new TokenFormatError(`token out of range: ${token}`);
  return token.toString(10);
}

/** Compare two tokens (or etcd revision strings) numerically, never lexically or as Number. */
export function compareTokens(a: bigint | string, b: bigint | string): -1 | 0 | 1 {
  const x = typeof a === 'string' ? parseFence(a) : a;
  const y = typeof b === 'string' ? parseFence(b) : b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Positive decimal integers <= int64 max, as one pattern (no refinement: exact in the JSON Schemas). */
export const TOKEN_PATTERN = decimalRangePattern(INT64_MAX, 1n);
/** Like {@link TOKEN_PATTERN}, with 0 ("never advanced"). */
export const FENCE_PATTERN = decimalRangePattern(INT64_MAX, 0n);

/** Wire schema of a token: a positive decimal integer <= int64 max, as a string. */
export const TokenSchema = z
  .string()
  .regex(new RegExp(TOKEN_PATTERN), 'must be a positive decimal integer <= 9223372036854775807')
  .describe('Fencing token: positive decimal integer (an etcd revision), at most int64 max.');

/** Wire schema of a fence: like a token, but 0 ("never advanced") is allowed. */
export const FenceSchema = z
  .string()
  .regex(new RegExp(FENCE_PATTERN), 'must be a non-negative decimal integer <= 9223372036854775807')
  .describe('Fence: the highest token advanced to for a resource; "0" if never advanced.');
