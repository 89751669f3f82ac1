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
 * etcd did not answer, or answered with an error we cannot act on; the outcome may be unknown.
 * `transient`: the same idempotent request may succeed if sent again (set where the error is cast).
 */
export class EtcdUnavailableError extends LeaseholdError {
  override name = 'EtcdUnavailableError';
  readonly transient: boolean;

  constructor(message: string, options?: { cause?: unknown; transient?: boolean }) {
    super('UNAVAILABLE', message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.transient = options?.transient ?? false;
  }
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
