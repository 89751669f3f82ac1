/**
 * Errors of the coordinator. Every error carries a stable {@link ErrorCode} from the protocol.
 * Expected refusals (a renew by a non-holder, a stale fence) are returned as data; these classes
 * are for failures (etcd or sink unavailable) and broken invariants.
 */
import { LeaseholdError, type ErrorCode } from '@leasehold/protocol';

export { LeaseholdError, ConfigError } from '@leasehold/protocol';

export class CoordinatorError extends LeaseholdError {
  override name = 'CoordinatorError';
}

/**
 * Why an etcd call failed, as cast once at the etcd boundary (etcd/etcd-backend.ts, the memory
 * etcd alike). Only `unavailable` means etcd could not be reached: it alone counts towards the
 * per-host circuit breaker and the etcd-health judgement. Every other failure is an answer — of
 * that one call — and leaves the connection, the breaker and the sessions alone.
 */
export const EtcdFailure = {
  /** Connection refused or lost, deadline exceeded, UNAVAILABLE, an open circuit: etcd did not answer. */
  UNAVAILABLE: 'unavailable',
  /** etcd's backend quota is reached (NOSPACE alarm): writes are refused, reads and deletes work. */
  NO_SPACE: 'no-space',
  /** The reply was larger than the client's receive limit (ETCD_MAX_RESPONSE_BYTES): a read to split. */
  RESPONSE_TOO_LARGE: 'response-too-large',
  /** The request was larger than etcd's --max-request-bytes (or the client's send limit). */
  REQUEST_TOO_LARGE: 'request-too-large',
  /** The coordinator's etcd user may not do this (its role must cover the prefix). */
  PERMISSION_DENIED: 'permission-denied',
  /** More ops in one txn than etcd's --max-txn-ops. */
  TOO_MANY_OPS: 'too-many-ops',
  /**
   * One txn request puts a key twice, or puts and deletes it (etcd's "duplicate key given in txn
   * request"; two deletes of one key are allowed): a request the coordinator should never build.
   */
  DUPLICATE_KEY: 'duplicate-key',
  /** The revision read or watched was compacted. */
  COMPACTED: 'compacted',
  /** The lease named in the request no longer exists. */
  LEASE_NOT_FOUND: 'lease-not-found',
  /** Anything else etcd answered with. */
  OTHER: 'other',
} as const;
export type EtcdFailure = (typeof EtcdFailure)[keyof typeof EtcdFailure];

/** The code an etcd failure carries on the wire (HTTP status / error frame). */
const CODE_OF: Readonly<Record<EtcdFailure, ErrorCode>> = {
  unavailable: 'UNAVAILABLE',
  'no-space': 'STORAGE_FULL',
  'response-too-large': 'INTERNAL',
  'request-too-large': 'PAYLOAD_TOO_LARGE',
  'permission-denied': 'INTERNAL',
  'too-many-ops': 'INTERNAL',
  'duplicate-key': 'INTERNAL',
  compacted: 'INTERNAL',
  'lease-not-found': 'INTERNAL',
  other: 'UNAVAILABLE',
};

/**
 * An etcd call failed. `failure` says how ({@link EtcdFailure}); `transient`: the same idempotent
 * request may succeed if sent again soon (only unavailability is).
 */
export class EtcdError extends LeaseholdError {
  override name = 'EtcdError';
  readonly failure: EtcdFailure;
  readonly transient: boolean;

  constructor(failure: EtcdFailure, message: string, options?: { cause?: unknown; transient?: boolean }) {
    super(CODE_OF[failure], message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.failure = failure;
    this.transient = options?.transient ?? false;
  }
}

/** etcd did not answer (or the circuit to it is open): the outcome of a write is unknown. */
export class EtcdUnavailableError extends EtcdError {
  override name = 'EtcdUnavailableError';

  constructor(message: string, options?: { cause?: unknown; transient?: boolean }) {
    super('unavailable', message, { ...options, transient: options?.transient ?? true });
  }
}

/** etcd answered, refusing this one call (quota, size, permission, …): nothing was written. */
export class EtcdRefusedError extends EtcdError {
  override name = 'EtcdRefusedError';

  constructor(failure: Exclude<EtcdFailure, 'unavailable'>, message: string, options?: { cause?: unknown }) {
    super(failure, message, { ...options, transient: false });
  }
}

/** True when `err` says etcd could not be reached (the only failure that may open a breaker). */
export function isEtcdUnavailable(err: unknown): boolean {
  return err instanceof EtcdError && err.failure === 'unavailable';
}

/** True when `err` is etcd's answer that its quota is reached. */
export function isStorageFull(err: unknown): boolean {
  return err instanceof EtcdError && err.failure === 'no-space';
}

/** The sink did not answer, or refused the coordinator's request with an error (not a refusal). */
export class SinkUnavailableError extends LeaseholdError {
  override name = 'SinkUnavailableError';

  constructor(message: string, options?: { cause?: unknown; code?: ErrorCode }) {
    super(options?.code ?? 'UNAVAILABLE', message, options);
  }
}

/** Code of any thrown value: a LeaseholdError's own code, else INTERNAL. */
export function codeOf(err: unknown): ErrorCode {
  return err instanceof LeaseholdError ? err.code : 'INTERNAL';
}
