import { LeaseholdError } from '@leasehold/protocol';

export { LeaseholdError, ConfigError } from '@leasehold/protocol';

/** The lease is gone (or may be): the handler's work will not be accepted under this grant. */
export class LeaseLostError extends LeaseholdError {
  override name = 'LeaseLostError';
  readonly reason: string;

  constructor(reason: string, options?: { cause?: unknown }) {
    super('LEASE_EXPIRED', `lease lost: ${reason}`, options);
    this.reason = reason;
  }
}

/** The sink refused the write (stale token, fence conflict, result conflict). */
export class WriteRefusedError extends LeaseholdError {
  override name = 'WriteRefusedError';
  readonly fence: bigint;

  constructor(code: 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT', fence: bigint) {
    super(code, `sink refused the write: ${code} (fence ${fence})`);
    this.fence = fence;
  }
}

/**
 * Throw from a handler to fail the task at once, whatever attempts its retry policy has left (a
 * bad payload, a permanent refusal). Any other error is retryable: the task is tried again after
 * its backoff, until its attempts are used up. A subclass keeps the behaviour; its `name` is what
 * the task records (and what a policy's `nonRetryable` names match for other errors).
 */
export class NonRetryableError extends Error {
  override name = 'NonRetryableError';
}

/** The worker's `payload` schema refused the task's payload: the task fails at once, naming the issues. */
export class InvalidPayloadError extends NonRetryableError {
  override name = 'InvalidPayloadError';
}

/**
 * The worker stopped itself on an error retrying cannot fix — every coordinator refused its
 * credential (`UNAUTHENTICATED`, `FORBIDDEN`) or its protocol version (`PROTOCOL_VERSION_MISMATCH`).
 * `run()` rejects with it; `code` is the coordinators' code and the message starts with it.
 */
export class FatalWorkerError extends LeaseholdError {
  override name = 'FatalWorkerError';
}

/** What a handler failure reports to the coordinator: the error's name and message, and whether to retry. */
export function describeFailure(err: unknown): { name: string; message: string; retryable: boolean } {
  const name = err instanceof Error && err.name !== '' ? err.name : typeof err;
  const message = err instanceof Error ? err.message : String(err);
  const code = err instanceof LeaseholdError ? ` [${err.code}]` : '';
  return {
    name: name.slice(0, 200),
    message: `${message}${code}`.slice(0, 2_000),
    retryable: !(err instanceof NonRetryableError),
  };
}
