/**
 * The one backoff of leasehold: capped exponential growth with **full jitter**, pure (randomness is
 * injected).
 *
 *   ceiling(n) = min(maxMs, initialMs · multiplier^n)          n = attempt, 0-based
 *   delay(n)   = round(ceiling(n) · (1 − jitter · r))          r = random(), clamped to [0, 1]
 *
 * With the default `jitter: 1` the delay is uniform over [0, ceiling(n)] ("full jitter", Brooker,
 * "Exponential Backoff And Jitter", AWS Architecture Blog, 2015): of the usual variants it spreads
 * retries of many clients that failed together the widest for the same ceiling, so a coordinator
 * that comes back is not met by a synchronised wave. `jitter: 0` gives the bare exponential
 * (deterministic: tests, and rate limits that must be exact, such as the console's login lock);
 * `jitter: 0.5` is "equal jitter" (uniform over [ceiling/2, ceiling]).
 *
 * The task retry policy's `retryDelayMs(backoff, n, random)` (model/retry-policy.ts, counted from
 * the first failed attempt, n ≥ 1) is this function at attempt n − 1; backoff.test.ts holds them to
 * it.
 */

export interface BackoffOptions {
  /** The ceiling of the first delay (attempt 0). */
  readonly initialMs: number;
  /** No delay is longer. */
  readonly maxMs: number;
  /** Growth of the ceiling per attempt. Default 2. */
  readonly multiplier?: number;
  /**
   * The share of the ceiling that is random, 0..1. Default 1 (full jitter: uniform over
   * [0, ceiling]); 0 = no jitter.
   */
  readonly jitter?: number;
}

const clamp01 = (x: number): number => (Number.isNaN(x) ? 0 : Math.min(Math.max(x, 0), 1));

/** The ceiling of attempt `attempt` (0-based): min(maxMs, initialMs · multiplier^attempt). */
export function backoffCeilingMs(attempt: number, options: BackoffOptions): number {
  const initial = Math.max(0, options.initialMs);
  const max = Math.max(0, options.maxMs);
  const exponent = Math.max(0, Math.floor(Number.isFinite(attempt) ? attempt : 0));
  const raw = initial * Math.max(1, options.multiplier ?? 2) ** exponent;
  return Math.min(max, Number.isFinite(raw) ? raw : max);
}

/**
 * The delay before retry number `attempt` (0-based: the first retry is attempt 0), in whole
 * milliseconds, within [ceiling · (1 − jitter), ceiling]. `random` returns [0, 1) (Math.random).
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number): number {
  const ceiling = backoffCeilingMs(attempt, options);
  const jitter = clamp01(options.jitter ?? 1);
  return Math.round(ceiling * (1 - jitter * clamp01(random())));
}
