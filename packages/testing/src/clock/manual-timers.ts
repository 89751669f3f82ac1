/**
 * Timers on a {@link ManualClock}, for the coordinator's injected `Timers`: a timer fires only
 * when the test moves time with {@link ManualTimers.advance}, so expiry, long polls and backoff
 * are deterministic.
 */
import type { TimerHandle, Timers } from '@leasehold/coordinator';
import type { ManualClock } from './manual-clock.js';

interface Entry {
  readonly id: number;
  readonly atMs: number;
  readonly callback: () => void;
}

const MAX_FIRINGS_PER_ADVANCE = 100_000;

/** Timers on a manual clock: `advance(ms)` moves the clock timer by timer and fires each in order. */
export class ManualTimers implements Timers {
  readonly clock: ManualClock;
  #entries: Entry[] = [];
  #nextId = 1;

  constructor(clock: ManualClock) {
    this.clock = clock;
  }

  setTimeout(callback: () => void, ms: number): TimerHandle {
    const entry = { id: this.#nextId++, atMs: this.clock.nowMs() + Math.max(0, ms), callback };
    this.#entries.push(entry);
    this.#entries.sort((a, b) => a.atMs - b.atMs || a.id - b.id);
    return { id: entry.id };
  }

  clearTimeout(handle: TimerHandle | undefined): void {
    if (handle === undefined) return;
    this.#entries = this.#entries.filter((e) => e.id !== handle.id);
  }

  /** Timers not yet fired. */
  get pending(): number {
    return this.#entries.length;
  }

  /** When the next timer is due, if any. */
  nextAtMs(): number | undefined {
    return this.#entries[0]?.atMs;
  }

  /**
   * Move the clock forward by `ms`, firing every timer that falls due on the way, in time order;
   * `between` runs after each firing (tests pass a function that lets promises settle). A callback
   * may move the clock itself (time that passes while code runs): the clock then ends where that
   * left it if it is past `ms`.
   */
  async advance(ms: number, between: () => Promise<void> = () => Promise.resolve()): Promise<void> {
    const target = this.clock.nowMs() + ms;
    let fired = 0;
    for (;;) {
      const next = this.#entries[0];
      if (next === undefined || next.atMs > target) break;
      this.#entries.shift();
      // A timer that keeps re-arming itself for "now" is a busy loop in production too: fail fast.
      if (++fired > MAX_FIRINGS_PER_ADVANCE)
        throw new Error(`timer storm: over ${MAX_FIRINGS_PER_ADVANCE} timers fired in one advance`);
      if (next.atMs > this.clock.nowMs()) this.clock.set(next.atMs);
      next.callback();
      await between();
    }
    if (target > this.clock.nowMs()) this.clock.set(target);
    await between();
  }
}
