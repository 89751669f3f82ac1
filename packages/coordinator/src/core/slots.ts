/**
 * Bounds on things held open at once — event streams, console streams, sessions of one worker —
 * counted when a request is *accepted*, not once it is set up.
 *
 * The rule that makes a bound hold under concurrency: take the slot in the same synchronous step
 * as the check, before the first `await` of the request (an etcd watch to start, a snapshot to
 * load, a session to create). A count read before an await and raised after it lets every request
 * that arrives meanwhile pass the same check: 300 streams opened at once against a bound of 256
 * all got 200 that way. A {@link Slot} is released exactly once (later calls do nothing), on
 * whichever path ends the thing it holds — refused later on, failed to start, closed.
 */

export interface Slot {
  /** Give the slot back; idempotent. */
  release(): void;
}

/** At most `max` slots taken at once. */
export class Slots {
  readonly max: number;
  #used = 0;

  constructor(max: number) {
    this.max = max;
  }

  get used(): number {
    return this.#used;
  }

  /** A slot now, or undefined when all `max` are taken. Synchronous: check and count are one step. */
  tryTake(): Slot | undefined {
    if (this.#used >= this.max) return undefined;
    this.#used += 1;
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.#used -= 1;
      },
    };
  }
}

/** At most `max` slots per key taken at once (e.g. sessions per worker id); empty keys are dropped. */
export class SlotsByKey {
  readonly max: number;
  readonly #used = new Map<string, number>();

  constructor(max: number) {
    this.max = max;
  }

  used(key: string): number {
    return this.#used.get(key) ?? 0;
  }

  /** A slot for `key` now, or undefined when `key` already holds `max`. */
  tryTake(key: string): Slot | undefined {
    const used = this.used(key);
    if (used >= this.max) return undefined;
    this.#used.set(key, used + 1);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        const left = this.used(key) - 1;
        if (left <= 0) this.#used.delete(key);
        else this.#used.set(key, left);
      },
    };
  }
}
