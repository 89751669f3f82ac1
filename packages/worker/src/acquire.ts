/**
 * One acquire: ask for a lease with a fresh unguessable request id (long-polling up to
 * `acquireWaitMs`), retrying THE SAME request id after a transport failure until a definite answer
 * — the coordinator returns the same grant for it, never a second one. `lease.none` and a
 * non-retryable refusal end it with nothing (after the idle backoff when the coordinator answered
 * at once). The worker's stop signal ends every wait at once; an answer in flight is still awaited,
 * so a grant that arrives while the worker closes is not lost (the caller gives it back).
 */
import {
  backoffDelayMs,
  LeaseholdError,
  type BackoffOptions,
  type CoordinatorMessage,
  type Grant,
  type RepeatGate,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { WorkerRequest } from './connection.js';
import { delay } from './delay.js';
import { unguessableId } from './random-ids.js';

export interface AcquireDeps {
  readonly request: (message: WorkerRequest, timeoutMs: number, signal: AbortSignal) => Promise<CoordinatorMessage>;
  readonly log: Logger;
  readonly acquireWaitMs: number;
  readonly idleBackoffMs: number;
  readonly requestTimeoutMs: number;
  readonly retryBackoff: BackoffOptions;
  readonly nowMs: () => number;
  readonly random: () => number;
  /** One log line per refusal loop. */
  readonly repeats: RepeatGate;
  /** Aborted when the worker closes. */
  readonly stop: AbortSignal;
}

export async function acquireOnce(deps: AcquireDeps): Promise<Grant | undefined> {
  const requestId = unguessableId();
  const waitMs = deps.acquireWaitMs;
  for (let attempt = 0; !deps.stop.aborted; attempt++) {
    try {
      const sentAtMs = deps.nowMs();
      const reply = await deps.request(
        { type: 'lease.acquire', requestId, ...(waitMs > 0 ? { waitMs } : {}) },
        deps.requestTimeoutMs + waitMs,
        deps.stop,
      );
      if (reply.type === 'lease.granted') return reply;
      if (reply.type === 'lease.none') {
        // The coordinator already waited (a long poll): ask again at once. One that answered at
        // once (it predates waitMs, or waiting is off) gets the idle back-off.
        if (waitMs > 0 && deps.nowMs() - sentAtMs >= waitMs / 2) return undefined;
        const ceiling = Math.min(reply.retryAfterMs || deps.idleBackoffMs, deps.idleBackoffMs);
        await delay(backoffDelayMs(0, { initialMs: ceiling, maxMs: ceiling, jitter: 0.5 }, deps.random), deps.stop);
        return undefined;
      }
      if (reply.type === 'error' && !reply.retryable) {
        const gate = deps.repeats.note(`acquire ${reply.code}`, deps.nowMs());
        if (gate.log) deps.log.warn({ code: reply.code, repeated: gate.suppressed }, 'acquire refused');
        await delay(deps.idleBackoffMs, deps.stop);
        return undefined;
      }
    } catch (err) {
      if (!(err instanceof LeaseholdError) || !err.retryable) throw err;
      deps.log.debug({ err }, 'acquire retry');
    }
    await delay(backoffDelayMs(attempt, deps.retryBackoff, deps.random), deps.stop);
  }
  return undefined;
}
