/** A small seeded PRNG (mulberry32) with the helpers schedules need. Never Math.random. */
import { seededRandom } from '../harness/fault-proxy.js';

export class Prng {
  readonly #next: () => number;

  constructor(seed: number) {
    this.#next = seededRandom(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.#next();
  }

  /** Integer in [min, max). */
  int(min: number, max: number): number {
    return min + Math.floor(this.#next() * (max - min));
  }

  chance(p: number): boolean {
    return this.#next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(0, items.length)] as T;
  }

  /** Pick by weight: `[[item, weight], ...]`. */
  weighted<T>(items: readonly (readonly [T, number])[]): T {
    const total = items.reduce((s, [, w]) => s + w, 0);
    let r = this.#next() * total;
    for (const [item, w] of items) {
      r -= w;
      if (r < 0) return item;
    }
    const last = items.at(-1);
    if (last === undefined) throw new RangeError('weighted pick from an empty list');
    return last[0];
  }

  /** A child generator for an independent stream (e.g. proxy jitter), still fixed by the seed. */
  fork(salt: number): Prng {
    return new Prng((this.int(0, 0x7fffffff) ^ Math.imul(salt, 0x9e3779b1)) >>> 0);
  }
}
