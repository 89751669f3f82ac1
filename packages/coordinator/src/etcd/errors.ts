/**
 * Errors from the store are cast once, at the backend boundary ({@link EtcdBackend} turns every
 * etcd3 / gRPC error into an {@link EtcdError} whose `failure` says how it failed — only
 * `unavailable` is transient). One predicate, {@link isRetryable}, decides what may be retried, and
 * one policy object, {@link readPolicy} (cockatiel), retries — used only for calls that are
 * idempotent (reads, ranges, lease revoke). Transactions are never retried blindly: a lost reply
 * leaves the outcome unknown, and the callers re-read instead.
 */
import { ExponentialBackoff, handleWhen, retry } from 'cockatiel';
import { EtcdError } from '../errors.js';

/** True when the same idempotent request may succeed if sent again. */
export function isRetryable(err: unknown): boolean {
  return err instanceof EtcdError && err.transient;
}

/** Any failure as the coordinator's etcd error (an uncast one: `other`, not transient). */
export function translateEtcdError(err: unknown, what: string): EtcdError {
  if (err instanceof EtcdError) return err;
  const detail = err instanceof Error ? `${err.constructor.name}: ${err.message}` : String(err);
  return new EtcdError('other', `etcd ${what} failed: ${detail}`, { cause: err, transient: false });
}

/** The retry policy of idempotent store calls: 3 attempts, 40 ms doubling (capped at 1 s). */
const idempotentRetry = retry(handleWhen(isRetryable), {
  maxAttempts: 2,
  backoff: new ExponentialBackoff({ initialDelay: 40, maxDelay: 1_000 }),
});

/** Run an idempotent store call under the one retry policy; failures come out translated. */
export async function readPolicy<T>(what: string, call: () => Promise<T>): Promise<T> {
  try {
    return await idempotentRetry.execute(call);
  } catch (err) {
    throw translateEtcdError(err, what);
  }
}
