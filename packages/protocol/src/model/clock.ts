/**
 * Time, injected. Pure code never reads a clock itself: it is handed one. Production passes a
 * monotonic clock (`performance.now()`); tests pass a {@link ManualClock} and move time by hand.
 */
export interface Clock {
  /** Monotonic milliseconds. Only differences are meaningful. */
  nowMs(): number;
}

export class ManualClock implements Clock {
  #now: number;

  constructor(startMs = 0) {
    this.#now = startMs;
  }

  nowMs(): number {
    return this.#now;
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError('a monotonic clock cannot go back');
    this.#now += ms;
  }

  set(ms: number): void {
    if (ms < this.#now) throw new RangeError('a monotonic clock cannot go back');
    this.#now = ms;
  }
}
