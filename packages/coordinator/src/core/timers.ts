/**
 * Time-based callbacks, injected. Services never call `setTimeout` themselves: production passes
 * real timers (`../timers.ts`); tests pass `ManualTimers` of `@leasehold/testing`, which fire only
 * when the test moves its manual clock — so expiry, long polls and backoff are deterministic.
 */

export interface TimerHandle {
  readonly id: number;
}

export interface Timers {
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle | undefined): void;
}

/**
 * One timer for the earliest of many deadlines (sessions' deadlines, delayed tasks' due times):
 * {@link setBy} sets it when it is not set, or moves it when a deadline comes before the one it is
 * set for; a later deadline leaves it alone. When it fires it is unset, then `fire` runs (which sets
 * it again for the deadlines left). So the cost is one timer whatever the count of deadlines, and
 * a call per new deadline is a compare.
 */
export class EarliestTimer {
  readonly #timers: Timers;
  readonly #nowMs: () => number;
  readonly #fire: () => void;
  readonly #minDelayMs: number;
  #handle: TimerHandle | undefined;
  #atMs = Number.POSITIVE_INFINITY;

  /**
   * `nowMs`: the clock the deadlines are read on. `minDelayMs`: the shortest wait it sets (1 keeps
   * a `fire` that finds nothing due and sets it again for the same past time from firing at once
   * over and over).
   */
  constructor(timers: Timers, nowMs: () => number, fire: () => void, minDelayMs = 0) {
    this.#timers = timers;
    this.#nowMs = nowMs;
    this.#fire = fire;
    this.#minDelayMs = minDelayMs;
  }

  /** The time it is set for (on the `nowMs` clock); undefined when not set. */
  get atMs(): number | undefined {
    return this.#handle === undefined ? undefined : this.#atMs;
  }

  /** Fire at `atMs` (a past one: after the minimum delay), unless already set no later. */
  setBy(atMs: number): void {
    if (this.#handle !== undefined && this.#atMs <= atMs) return;
    this.#timers.clearTimeout(this.#handle);
    this.#atMs = atMs;
    this.#handle = this.#timers.setTimeout(
      () => {
        this.#handle = undefined;
        this.#atMs = Number.POSITIVE_INFINITY;
        this.#fire();
      },
      Math.max(this.#minDelayMs, Math.ceil(atMs - this.#nowMs())),
    );
  }

  /** Unset (a later {@link setBy} sets it again). */
  clear(): void {
    this.#timers.clearTimeout(this.#handle);
    this.#handle = undefined;
    this.#atMs = Number.POSITIVE_INFINITY;
  }
}
