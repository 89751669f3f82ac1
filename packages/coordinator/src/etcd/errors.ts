/**
 * etcd / gRPC errors are translated here and nowhere else. One predicate, {@link isRetryable},
 * decides what may be retried, and one helper, {@link withRetry}, retries — used only for calls
 * that are idempotent (reads, lease revoke, keepalive). Transactions are never retried blindly:
 * a lost reply leaves the outcome unknown, and the callers re-read instead.
 */
import {
  EtcdLeaseInvalidError,
  GRPCDeadlineExceededError,
  GRPCUnavailableError,
  isRecoverableError,
  ClientRuntimeError,
} from 'etcd3';
import { EtcdUnavailableError } from '../errors.js';

/** True when the same idempotent request may succeed if sent again. */
export function isRetryable(err: unknown): boolean {
  if (err instanceof EtcdUnavailableError) return isRetryable(err.cause);
  if (!(err instanceof Error)) return false;
  return (
    isRecoverableError(err) ||
    err instanceof GRPCUnavailableError ||
    err instanceof GRPCDeadlineExceededError ||
    err instanceof ClientRuntimeError
  );
}

/** The lease named in a request no longer exists (expired or revoked). */
export function isLeaseNotFound(err: unknown): boolean {
  return (
    err instanceof EtcdLeaseInvalidError || (err instanceof Error && /requested lease not found/.test(err.message))
  );
}

/**
 * Watch cancelled because the revision it needed was compacted. Only a hint for logs: etcd 3.4
 * cancels a compacted watch with an empty reason and etcd3 drops `compact_revision`, so the
 * watch feed rebuilds on ANY cancellation.
 */
export function isCompacted(err: unknown): boolean {
  return err instanceof Error && /compacted/.test(err.message);
}

/** Wrap any etcd failure in the coordinator's error type (code UNAVAILABLE, cause kept). */
export function translateEtcdError(err: unknown, what: string): EtcdUnavailableError {
  if (err instanceof EtcdUnavailableError) return err;
  const detail = err instanceof Error ? `${err.constructor.name}: ${err.message}` : String(err);
  return new EtcdUnavailableError(`etcd ${what} failed: ${detail}`, { cause: err });
}

export interface RetryOptions {
  readonly attempts?: number;
  readonly baseDelayMs?: number;
}

/** Run an idempotent etcd call, retrying retryable failures with capped exponential backoff. */
export async function withRetry<T>(what: string, call: () => Promise<T>, options: RetryOptions = {}): Promise<T> {
  const attempts = options.attempts ?? 3;
  const base = options.baseDelayMs ?? 40;
  let last: unknown;
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    try {
      return await call();
    } catch (err) {
      last = err;
      if (!isRetryable(err) || attempt === attempts) break;
      await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, base * 2 ** (attempt - 1))));
    }
  }
  throw translateEtcdError(last, what);
}
