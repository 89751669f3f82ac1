// The public surface of @leasehold/fence-pg. Named exports only.
export { fencedTransaction } from './fenced-transaction.js';
export type { FencedTransactionRequest, FencedTransactionOutcome, FencedCallback } from './fenced-transaction.js';
export { transactionRetryPolicy, LeaseholdBackoff } from './retry.js';
export type { TransactionRetryOptions } from './retry.js';
export {
  migrateFenceSchema,
  readFenceSchemaVersion,
  FENCE_SCHEMA,
  FENCE_SCHEMA_VERSION,
  FENCE_APPLICATION,
} from './schema.js';
export {
  FenceSchemaError,
  LeaseholdError,
  isRetryableTransactionError,
  isConnectionError,
  unavailable,
} from './errors.js';
