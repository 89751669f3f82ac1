/**
 * The one retry policy for a PostgreSQL transaction of leasehold's (cockatiel): `fencedTransaction`
 * builds one per call, the sink's PostgreSQL store one per store. Same rule for both:
 *
 *   retried   an error {@link isRetryableTransactionError} accepts: 40001 serialization_failure,
 *             40P01 deadlock_detected, 23505 on leasehold.results_pkey (two writers of one result
 *             id raced; the next attempt reads the stored result). Nothing else: a connection
 *             error, a lock or statement timeout, a refusal, the caller's own error go up at once.
 *   attempts  `maxAttempts` in all (the first one included), at least 1
 *   backoff   `backoffDelayMs` of @leasehold/protocol (capped exponential, full jitter) at the
 *             0-based retry number: the first retry waits [0, initialMs], the n-th
 *             [0, min(maxMs, initialMs · 2^(n−1))]
 * The whole transaction runs again from fresh reads each time (the caller's function is the attempt).
 */
import { backoffDelayMs, type BackoffOptions } from '@leasehold/protocol';
import {
  handleWhen,
  retry,
  type IBackoff,
  type IBackoffFactory,
  type IRetryBackoffContext,
  type RetryPolicy,
} from 'cockatiel';
import { isRetryableTransactionError } from './errors.js';

export interface TransactionRetryOptions {
  /** Attempts in all, the first one included (cockatiel counts retries: this minus one). */
  readonly maxAttempts: number;
  readonly backoff: BackoffOptions;
  /** [0, 1); default Math.random. */
  readonly random?: () => number;
}

/** cockatiel's backoff as leasehold's one backoff formula: retry n (1-based) waits backoffDelayMs(n − 1). */
export class LeaseholdBackoff implements IBackoffFactory<IRetryBackoffContext<unknown>> {
  readonly #options: BackoffOptions;
  readonly #random: () => number;

  constructor(options: BackoffOptions, random: () => number = Math.random) {
    this.#options = options;
    this.#random = random;
  }

  next(context: IRetryBackoffContext<unknown>): IBackoff<IRetryBackoffContext<unknown>> {
    return {
      duration: backoffDelayMs(context.attempt - 1, this.#options, this.#random),
      next: (later) => this.next(later),
    };
  }
}

/** The retry policy of one PostgreSQL transaction (see the header). */
export function transactionRetryPolicy(options: TransactionRetryOptions): RetryPolicy {
  return retry(handleWhen(isRetryableTransactionError), {
    maxAttempts: Math.max(1, Math.floor(options.maxAttempts)) - 1,
    backoff: new LeaseholdBackoff(options.backoff, options.random),
  });
}
