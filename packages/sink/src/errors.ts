/**
 * Errors of the sink. Expected refusals (STALE_TOKEN, FENCE_CONFLICT, RESULT_CONFLICT) are data and
 * never thrown; these classes are for failures and broken invariants. All extend the shared
 * `LeaseholdError` of @leasehold/protocol, so `code` and `retryable` mean the same everywhere.
 */
import { LeaseholdError, isErrorCode, isRetryableCode } from '@leasehold/protocol';

// SchemaVersionError: the database was written by a newer schema version (or is not a sink database).
export { LeaseholdError, ConfigError, SchemaVersionError } from '@leasehold/protocol';

/** The sink is shutting down and takes no new work. */
export class ShuttingDownError extends LeaseholdError {
  override name = 'ShuttingDownError';

  constructor() {
    super('SHUTTING_DOWN', 'the sink is shutting down');
  }
}

/** The one retry predicate: a LeaseholdError says so itself; anything else is not retryable. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof LeaseholdError) return err.retryable;
  if (typeof err === 'object' && err !== null && 'code' in err) {
    const { code } = err;
    return isErrorCode(code) && isRetryableCode(code);
  }
  return false;
}

/**
 * Wrap an unexpected store failure: the batch was rolled back, so nothing happened; retry is safe.
 * A store that already said UNAVAILABLE (PostgreSQL: maybe with "outcome unknown") is passed on as is.
 */
export function storeUnavailable(cause: unknown): LeaseholdError {
  if (cause instanceof LeaseholdError && cause.code === 'UNAVAILABLE') return cause;
  const detail = cause instanceof Error ? cause.message : String(cause);
  return new LeaseholdError('UNAVAILABLE', `store commit failed, nothing was applied: ${detail}`, {
    cause,
    retryable: true,
  });
}
