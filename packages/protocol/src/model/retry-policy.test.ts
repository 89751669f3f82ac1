import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY, RetryPolicySchema, retryDelayMs } from './retry-policy.js';

describe('retry policy', () => {
  it('the schema takes a whole policy and refuses unknown fields', () => {
    expect(RetryPolicySchema.parse(DEFAULT_RETRY_POLICY)).toEqual(DEFAULT_RETRY_POLICY);
    expect(RetryPolicySchema.safeParse({ ...DEFAULT_RETRY_POLICY, extra: 1 }).success).toBe(false);
    expect(RetryPolicySchema.safeParse({ ...DEFAULT_RETRY_POLICY, maxAttempts: 0 }).success).toBe(false);
  });

  it('a random source outside [0, 1) is clamped: the delay stays within [(1 - jitter) · d, d]', () => {
    const backoff = { initialMs: 1_000, multiplier: 2, maxMs: 10_000, jitter: 0.5 };
    expect(retryDelayMs(backoff, 2, () => 7)).toBe(1_000); // clamped to 1: the full jitter
    expect(retryDelayMs(backoff, 2, () => -3)).toBe(2_000); // clamped to 0: no jitter
    expect(retryDelayMs(backoff, 2, () => 0.5)).toBe(1_500);
    expect(retryDelayMs(backoff, 9, () => 0)).toBe(10_000); // capped
  });
});
