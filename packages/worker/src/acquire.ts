/**
 * One acquire: ask for a lease with a fresh unguessable request id (long-polling up to
 * `acquireWaitMs`), retrying THE SAME request id after a transport failure until a definite answer
 * — the coordinator returns the same grant for it, never a second one. `lease.none` and a
 * non-retryable refusal end it with nothing (after the idle backoff when the coordinator answered
 * at once). The worker's stop signal ends every wait at once; an answer in flight is still awaited,
 * so a grant that arrives while the worker closes is not lost (the caller gives it back).
 *
 * A slot's next acquire may instead leave inside its `task.complete` (`next`, when the coordinator
 * takes one: {@link SlotNext}); its first answer is then that carried acquire's reply, awaited even
 * when the worker began closing meanwhile (it was sent), and a retry repeats its request id.
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
import type { NextAcquire, WorkerRequest } from './connection.js';
import { delay } from './delay.js';
import { unguessableId } from './random-ids.js';

export interface AcquireDeps {
  readonly request: (message: WorkerRequest, timeoutMs: number, signal: AbortSignal) => Promise<CoordinatorMessage>;
  /** Until a session is open (a welcome received), or rejects like `request` would. */
  readonly ready: (timeoutMs: number, signal: AbortSignal) => Promise<void>;
  readonly log: Logger;
  /** The long poll's `waitMs` for the next acquire (options.ts `acquireWaitMs`: it may depend on the coordinator). */
  readonly acquireWaitMs: () => number;
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

/** A slot's next acquire, which the `task.complete` of its current attempt may carry. */
export interface SlotNext {
  /** The acquire's fields and how long its reply may take. */
  readonly acquire: NextAcquire;
  /** Whether the slot goes on after this attempt: asked when the completion is sent. */
  readonly wanted: () => boolean;
  /** Set once a completion carried it: the acquire's reply, and when it was sent. */
  carried?: { readonly reply: Promise<CoordinatorMessage>; readonly sentAtMs: number };
}

/**
 * A fresh next acquire for a slot. Its reply may take the completion's time (the coordinator takes
 * the acquire once the completion is answered) plus a lone acquire's.
 */
export function slotNext(
  deps: Pick<AcquireDeps, 'acquireWaitMs' | 'requestTimeoutMs'>,
  wanted: () => boolean,
): SlotNext {
  const waitMs = deps.acquireWaitMs();
  return {
    acquire: {
      acquire: { requestId: unguessableId(), ...(waitMs > 0 ? { waitMs } : {}) },
      timeoutMs: 2 * deps.requestTimeoutMs + waitMs,
    },
    wanted,
  };
}

export async function acquireOnce(deps: AcquireDeps, next?: SlotNext): Promise<Grant | undefined> {
  const requestId = next?.acquire.acquire.requestId ?? unguessableId();
  let waitMs = next?.acquire.acquire.waitMs ?? 0;
  let carried = next?.carried;
  for (let attempt = 0; carried !== undefined || !deps.stop.aborted; attempt++) {
    try {
      let answer = carried?.reply;
      let sentAtMs = carried?.sentAtMs ?? 0;
      if (answer === undefined) {
        // The long poll may depend on the coordinator that serves the session (its welcome).
        await deps.ready(deps.requestTimeoutMs, deps.stop);
        waitMs = deps.acquireWaitMs();
        sentAtMs = deps.nowMs();
        answer = deps.request(
          { type: 'lease.acquire', requestId, ...(waitMs > 0 ? { waitMs } : {}) },
          deps.requestTimeoutMs + waitMs,
          deps.stop,
        );
      }
      carried = undefined;
      const reply = await answer;
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
