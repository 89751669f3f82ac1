/**
 * Stable error codes shared by every package and carried on the wire.
 *
 * Codes never change meaning once published. `retryable` says whether the *same* request may
 * succeed if sent again later unchanged; `httpStatus` is the status the HTTP APIs use for it.
 */
export const ErrorCode = {
  /** Token is lower than the resource's fence: a newer holder exists. */
  STALE_TOKEN: 'STALE_TOKEN',
  /** Token is higher than the fence: it was never advanced at the target (not issued by a grant). */
  FENCE_CONFLICT: 'FENCE_CONFLICT',
  /** Same result id was stored with a different payload. */
  RESULT_CONFLICT: 'RESULT_CONFLICT',
  /** The caller does not hold the lease it names (other owner, other incarnation, other token, none). */
  NOT_HOLDER: 'NOT_HOLDER',
  /** The lease's deadline has passed; it cannot be renewed or revived. */
  LEASE_EXPIRED: 'LEASE_EXPIRED',
  /** Another holder has a valid lease on the resource. */
  LEASE_HELD: 'LEASE_HELD',
  /** The worker's session is gone (expired or revoked). */
  SESSION_EXPIRED: 'SESSION_EXPIRED',
  /** Missing or wrong credentials. */
  UNAUTHENTICATED: 'UNAUTHENTICATED',
  /** Authenticated, but the capability does not allow this operation. */
  FORBIDDEN: 'FORBIDDEN',
  /** Malformed or schema-violating input. */
  INVALID_MESSAGE: 'INVALID_MESSAGE',
  /** Body or frame larger than the configured limit. */
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  /** Peer speaks an incompatible protocol version. */
  PROTOCOL_VERSION_MISMATCH: 'PROTOCOL_VERSION_MISMATCH',
  /** No such resource, task, result or route. */
  NOT_FOUND: 'NOT_FOUND',
  /** Request conflicts with existing state (e.g. same task id, different definition). */
  CONFLICT: 'CONFLICT',
  /** The session already has as many grants and acquires in flight as the capacity its hello declared. */
  CAPACITY_EXCEEDED: 'CAPACITY_EXCEEDED',
  /**
   * A bound of the service is reached and the request was refused before it did anything: event
   * streams open at once, sessions of one worker, console login attempts from one address. Retry
   * later (after `Retry-After` when the answer has one).
   */
  LIMIT_REACHED: 'LIMIT_REACHED',
  /** A dependency (etcd, sink, disk) is unavailable; the outcome is unknown or nothing happened. */
  UNAVAILABLE: 'UNAVAILABLE',
  /** The service is shutting down and takes no new work. */
  SHUTTING_DOWN: 'SHUTTING_DOWN',
  /**
   * The coordination store is full (etcd's backend quota is reached, its NOSPACE alarm raised):
   * nothing was written. Reads still work; an operator compacts, defragments and disarms the alarm
   * (docs/operations.md, "etcd at its quota"), after which the same request succeeds.
   */
  STORAGE_FULL: 'STORAGE_FULL',
  /** Broken invariant inside the service. */
  INTERNAL: 'INTERNAL',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

interface CodeInfo {
  readonly retryable: boolean;
  readonly httpStatus: number;
}

export const ERROR_CODE_INFO: Readonly<Record<ErrorCode, CodeInfo>> = Object.freeze({
  STALE_TOKEN: { retryable: false, httpStatus: 409 },
  FENCE_CONFLICT: { retryable: false, httpStatus: 409 },
  RESULT_CONFLICT: { retryable: false, httpStatus: 409 },
  NOT_HOLDER: { retryable: false, httpStatus: 409 },
  LEASE_EXPIRED: { retryable: false, httpStatus: 409 },
  LEASE_HELD: { retryable: true, httpStatus: 409 },
  SESSION_EXPIRED: { retryable: false, httpStatus: 409 },
  UNAUTHENTICATED: { retryable: false, httpStatus: 401 },
  FORBIDDEN: { retryable: false, httpStatus: 403 },
  INVALID_MESSAGE: { retryable: false, httpStatus: 400 },
  PAYLOAD_TOO_LARGE: { retryable: false, httpStatus: 413 },
  PROTOCOL_VERSION_MISMATCH: { retryable: false, httpStatus: 400 },
  NOT_FOUND: { retryable: false, httpStatus: 404 },
  CONFLICT: { retryable: false, httpStatus: 409 },
  CAPACITY_EXCEEDED: { retryable: true, httpStatus: 429 },
  LIMIT_REACHED: { retryable: true, httpStatus: 429 },
  UNAVAILABLE: { retryable: true, httpStatus: 503 },
  SHUTTING_DOWN: { retryable: true, httpStatus: 503 },
  STORAGE_FULL: { retryable: true, httpStatus: 503 },
  INTERNAL: { retryable: true, httpStatus: 500 },
});

export const ERROR_CODES = Object.freeze(Object.values(ErrorCode)) as readonly ErrorCode[];

export function isRetryableCode(code: ErrorCode): boolean {
  return ERROR_CODE_INFO[code].retryable;
}

export function httpStatusOf(code: ErrorCode): number {
  return ERROR_CODE_INFO[code].httpStatus;
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_CODE_INFO, value);
}
