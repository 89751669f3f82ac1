/**
 * The worker's conservative view of its lease deadline.
 *
 * The coordinator judges expiry with its own clock; the worker never tells it a time. When the
 * worker sends a heartbeat (or renew) at local time `sentAt` and the coordinator answers "ttlMs
 * left", the coordinator accepted it no earlier than `sentAt`, so its deadline is no earlier than
 * `sentAt + ttlMs`. The worker keeps `sentAt + ttlMs * (1 - driftRatio) - marginMs`: earlier than
 * the coordinator's, even if the two clocks run at slightly different rates.
 *
 * This is an optimisation (stop doing pointless work, stop sending writes that will be refused);
 * the fence at the sink is the safety.
 */
export interface DeadlineOptions {
  readonly driftRatio: number;
  readonly marginMs: number;
}

export const DEFAULT_DEADLINE_OPTIONS: DeadlineOptions = { driftRatio: 0.01, marginMs: 20 };

export function conservativeDeadlineMs(sentAtMs: number, ttlMs: number, opts = DEFAULT_DEADLINE_OPTIONS): number {
  return sentAtMs + ttlMs * (1 - opts.driftRatio) - opts.marginMs;
}

export class LocalDeadline {
  #deadlineMs = Number.NEGATIVE_INFINITY;

  /** Move the deadline forward on an acknowledgement; never back (a late ack of an old heartbeat). */
  acknowledge(sentAtMs: number, ttlMs: number, opts = DEFAULT_DEADLINE_OPTIONS): void {
    const next = conservativeDeadlineMs(sentAtMs, ttlMs, opts);
    if (next > this.#deadlineMs) this.#deadlineMs = next;
  }

  /** Forget it: the session is gone. */
  clear(): void {
    this.#deadlineMs = Number.NEGATIVE_INFINITY;
  }

  get deadlineMs(): number {
    return this.#deadlineMs;
  }

  isValidAt(nowMs: number): boolean {
    return nowMs < this.#deadlineMs;
  }

  remainingMs(nowMs: number): number {
    return Math.max(0, this.#deadlineMs - nowMs);
  }
}
