import { ERROR_CODE_INFO, type ErrorCode } from './error-codes.js';

/**
 * Base error of every leasehold package. Carries a stable {@link ErrorCode} and whether a retry
 * of the same request may succeed. Expected outcomes (a stale write, a refused renew) are returned
 * as data, not thrown; this is for failures and broken invariants.
 */
export class LeaseholdError extends Error {
  override name = 'LeaseholdError';
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options?.retryable ?? ERROR_CODE_INFO[code].retryable;
  }
}

/** Configuration is invalid; `problems` lists every problem found, not just the first. */
export class ConfigError extends LeaseholdError {
  override name = 'ConfigError';
  readonly problems: readonly string[];

  constructor(problems: readonly string[]) {
    super('INVALID_MESSAGE', `invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.problems = problems;
  }
}

/**
 * A database was written by a newer schema version than this build's, or is not leasehold's: refuse
 * to use it (the sink's stores, fence-pg's `leasehold` schema). Not retryable.
 */
export class SchemaVersionError extends LeaseholdError {
  override name = 'SchemaVersionError';
  readonly foundVersion: number;

  constructor(message: string, foundVersion: number) {
    super('INTERNAL', message, { retryable: false });
    this.foundVersion = foundVersion;
  }
}
