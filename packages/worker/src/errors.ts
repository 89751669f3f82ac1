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
