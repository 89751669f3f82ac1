/**
 * Retry policy of a task: how many grants it may have, how long to wait between them, and which
 * errors end it at once. Pure: the coordinator resolves a task's policy at submit (installation
 * defaults + the submit's overrides), stores it in the task record, and every coordinator decides
 * from the stored policy — so whichever coordinator handles an attempt's end, the answer is the same.
 */
import { z } from 'zod';

/** Upper bounds: a policy is data from an admin request, so every number is bounded. */
export const MAX_ATTEMPTS_LIMIT = 1_000;
export const MAX_BACKOFF_MS = 7 * 24 * 3_600_000;
export const MAX_NON_RETRYABLE = 32;

const DelaySchema = z.number().int().nonnegative().max(MAX_BACKOFF_MS);

export const BackoffSchema = z.strictObject({
  /** Delay after the first failed attempt. */
  initialMs: DelaySchema,
  /** Each further attempt waits this many times longer (1 = constant). */
  multiplier: z.number().min(1).max(100),
  /** Cap on one delay. */
  maxMs: DelaySchema,
  /** 0..1: a delay d becomes a uniform draw from [d·(1 − jitter), d]. */
  jitter: z.number().min(0).max(1),
});
export type Backoff = z.infer<typeof BackoffSchema>;

/** Error names (`Error.name`) that fail a task at once, without retries. */
const ErrorNameSchema = z.string().min(1).max(200);

export const RetryPolicySchema = z.strictObject({
  /** Grants a task may have in one attempt budget (lease expiries count; releases do not). */
  maxAttempts: z.number().int().min(1).max(MAX_ATTEMPTS_LIMIT),
  backoff: BackoffSchema,
  nonRetryable: z.array(ErrorNameSchema).max(MAX_NON_RETRYABLE),
});
export type RetryPolicy = z.infer<typeof RetryPolicySchema>;

/** What a submit may override; anything left out comes from the installation's defaults. */
export const RetryPolicyInputSchema = z.strictObject({
  maxAttempts: RetryPolicySchema.shape.maxAttempts.optional(),
  backoff: BackoffSchema.partial().optional(),
  nonRetryable: RetryPolicySchema.shape.nonRetryable.optional(),
});
export type RetryPolicyInput = z.infer<typeof RetryPolicyInputSchema>;

/** The defaults of an installation that configured none: 5 attempts, 1 s doubling to 5 min, ±20 %. */
export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  maxAttempts: 5,
  backoff: Object.freeze({ initialMs: 1_000, multiplier: 2, maxMs: 300_000, jitter: 0.2 }),
  nonRetryable: Object.freeze([]) as unknown as string[],
});

/** `defaults` with `input`'s overrides; a cap below the initial delay is raised to it. */
export function resolveRetryPolicy(defaults: RetryPolicy, input: RetryPolicyInput | undefined): RetryPolicy {
  const given = input?.backoff;
  const backoff: Backoff = {
    initialMs: given?.initialMs ?? defaults.backoff.initialMs,
    multiplier: given?.multiplier ?? defaults.backoff.multiplier,
    maxMs: given?.maxMs ?? defaults.backoff.maxMs,
    jitter: given?.jitter ?? defaults.backoff.jitter,
  };
  return {
    maxAttempts: input?.maxAttempts ?? defaults.maxAttempts,
    backoff: { ...backoff, maxMs: Math.max(backoff.maxMs, backoff.initialMs) },
    nonRetryable: [...(input?.nonRetryable ?? defaults.nonRetryable)],
  };
}

/**
 * Delay before the grant that follows the `n`-th consecutive failed attempt (n ≥ 1):
 * min(maxMs, initialMs · multiplier^(n−1)), then jittered down by up to `jitter` of itself.
 * `random` returns [0, 1).
 */
export function retryDelayMs(backoff: Backoff, n: number, random: () => number): number {
  const exponent = Math.max(0, Math.floor(n) - 1);
  const raw = backoff.initialMs * backoff.multiplier ** exponent;
  const capped = Math.min(backoff.maxMs, Number.isFinite(raw) ? raw : backoff.maxMs);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(capped * (1 - backoff.jitter * r));
}
