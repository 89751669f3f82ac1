/**
 * Refusals decided before the store (401, 403, 400, 413 on writes and advances), published to the
 * event streams connected at that moment. Nothing is stored: a refusal is not a decision, and an
 * anonymous client must not be able to grow the sink's database by being refused.
 *
 * Rate-limited (a token bucket, `perSecond` with a burst of the same size): a flood of refused
 * requests costs each stream at most that many events a second; the next published refusal
 * carries `suppressed`, the count left out since the previous one.
 */
import type { SinkRefusalEvent } from '@leasehold/protocol';

export type RefusalInput = Omit<SinkRefusalEvent, 'type' | 'atMs' | 'suppressed'>;

export interface RefusalFeedOptions {
  /** Refusal events per second at most (burst of the same size). Default 100. */
  readonly perSecond?: number;
  readonly nowMs?: () => number;
}

export class RefusalFeed {
  readonly #listeners = new Set<(event: SinkRefusalEvent) => void>();
  readonly #perSecond: number;
  readonly #now: () => number;
  #tokens: number;
  #refilledAtMs: number;
  #suppressed = 0;

  constructor(options: RefusalFeedOptions = {}) {
    this.#perSecond = options.perSecond ?? 100;
    this.#now = options.nowMs ?? Date.now;
    this.#tokens = this.#perSecond;
    this.#refilledAtMs = this.#now();
  }

  /** True when someone listens (the HTTP layer skips building events otherwise). */
  get listening(): boolean {
    return this.#listeners.size > 0;
  }

  subscribe(listener: (event: SinkRefusalEvent) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  publish(input: RefusalInput): void {
    if (this.#listeners.size === 0) return;
    const now = this.#now();
    this.#tokens = Math.min(this.#perSecond, this.#tokens + ((now - this.#refilledAtMs) * this.#perSecond) / 1000);
    this.#refilledAtMs = now;
    if (this.#tokens < 1) {
      this.#suppressed++;
      return;
    }
    this.#tokens -= 1;
    const event: SinkRefusalEvent = { type: 'refusal', ...input, atMs: now };
    if (this.#suppressed > 0) event.suppressed = this.#suppressed;
    this.#suppressed = 0;
    for (const listener of this.#listeners) listener(event);
  }
}
