/**
 * One log line per failure loop instead of one per attempt: a {@link RepeatGate} lets the first
 * occurrence of a key through, counts the repeats for `windowMs`, then lets one through again with
 * how many were suppressed. Pure (the caller gives the time), so every package's retry loops can
 * share it and tests can drive it.
 *
 * ```ts
 * const g = gate.note('connect', now);
 * if (g.log) log.warn({ err, repeated: g.suppressed }, 'coordinator connection failed');
 * ```
 */
export interface GateDecision {
  /** Log this occurrence. */
  readonly log: boolean;
  /** Occurrences not logged since the last logged one (report it on this line). */
  readonly suppressed: number;
}

export class RepeatGate {
  readonly #windowMs: number;
  readonly #keys = new Map<string, { lastLoggedMs: number; suppressed: number }>();

  constructor(windowMs = 30_000) {
    this.#windowMs = windowMs;
  }

  note(key: string, nowMs: number): GateDecision {
    const entry = this.#keys.get(key);
    if (entry === undefined || nowMs - entry.lastLoggedMs >= this.#windowMs) {
      const suppressed = entry?.suppressed ?? 0;
      this.#keys.set(key, { lastLoggedMs: nowMs, suppressed: 0 });
      return { log: true, suppressed };
    }
    entry.suppressed += 1;
    return { log: false, suppressed: entry.suppressed };
  }

  /**
   * The loop ended (success): forget the key; returns how many repeats went unlogged since the
   * last line, so the caller can say "recovered after N more failures".
   */
  clear(key: string): number {
    const suppressed = this.#keys.get(key)?.suppressed ?? 0;
    this.#keys.delete(key);
    return suppressed;
  }
}
