/**
 * A monotonic clock moved by hand: what the coordinator's session deadlines, the in-memory etcd's
 * lease TTLs and the protocol model are judged by in tests.
 */
import type { Clock } from '@leasehold/protocol';

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
