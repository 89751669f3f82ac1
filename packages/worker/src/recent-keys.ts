/**
 * The last `max` keys added, oldest forgotten first: "was this seen lately?" in bounded memory.
 * The slots use it to never run one grant twice (a second delivery of a grant is a replay of its
 * acquire, which comes within a request timeout, long before 4,096 other grants have run).
 */
export class RecentKeys {
  readonly #max: number;
  readonly #keys = new Set<string>();

  constructor(max: number) {
    if (!Number.isInteger(max) || max < 1)
      throw new RangeError(`RecentKeys: max must be a positive integer, got ${max}`);
    this.#max = max;
  }

  get size(): number {
    return this.#keys.size;
  }

  has(key: string): boolean {
    return this.#keys.has(key);
  }

  /** Remember `key`; forgets the oldest key when more than `max` are held. */
  add(key: string): void {
    if (this.#keys.has(key)) return;
    this.#keys.add(key);
    if (this.#keys.size > this.#max) {
      const oldest = this.#keys.values().next();
      if (oldest.done !== true) this.#keys.delete(oldest.value);
    }
  }
}
