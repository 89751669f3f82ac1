/**
 * Errors of @leasehold/fence-pg. Expected refusals (STALE_TOKEN, FENCE_CONFLICT, RESULT_CONFLICT) are
 * data and never thrown. Thrown: a capability that does not verify (FORBIDDEN), PostgreSQL
 * unreachable or a commit whose outcome is unknown (UNAVAILABLE), a schema this build cannot use.
 * PostgreSQL errors are translated here, once, at the boundary.
 */
import { LeaseholdError, SchemaVersionError } from '@leasehold/protocol';

export { LeaseholdError } from '@leasehold/protocol';

/** The `leasehold` schema is newer than this build, or is not ours: refuse to use it. */
export class FenceSchemaError extends SchemaVersionError {
  override name = 'FenceSchemaError';
}

/** SQLSTATEs after which the whole transaction is run again from fresh reads. */
const RETRY_SQLSTATES = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
]);

interface PgErrorFields {
  readonly code?: unknown;
  readonly schema?: unknown;
  readonly constraint?: unknown;
}

function fieldsOf(err: unknown): PgErrorFields {
  return typeof err === 'object' && err !== null ? err : {};
}

/**
 * True when running the transaction again may succeed and gives the exact answer: a serialization
 * failure, a deadlock, or a unique violation on leasehold's own results key (two writers of one
 * result id raced; the next attempt reads the stored result and answers replayed / RESULT_CONFLICT).
 */
export function isRetryableTransactionError(err: unknown): boolean {
  const { code, schema, constraint } = fieldsOf(err);
  if (typeof code !== 'string') return false;
  if (RETRY_SQLSTATES.has(code)) return true;
  return code === '23505' && schema === 'leasehold' && constraint === 'results_pkey';
}

/**
 * True for errors that say PostgreSQL is unreachable or went away (no SQLSTATE from a live session,
 * or an operator / crash shutdown, or a connection exception): the database, not the request, failed.
 */
export function isConnectionError(err: unknown): boolean {
  const { code } = fieldsOf(err);
  if (typeof code !== 'string') return err instanceof Error;
  if (/^E[A-Z]+$/.test(code)) return true; // ECONNREFUSED, ECONNRESET, EPIPE, ETIMEDOUT, ...
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03';
}

/** PostgreSQL failed under a transaction: UNAVAILABLE, saying whether the commit may have happened. */
export function unavailable(cause: unknown, commitSent: boolean): LeaseholdError {
  const detail = cause instanceof Error ? cause.message : String(cause);
  const what = commitSent
    ? 'the commit outcome is unknown (retry with the same result id to learn it)'
    : 'nothing was applied';
  return new LeaseholdError('UNAVAILABLE', `postgres failed, ${what}: ${detail}`, { cause, retryable: true });
}
