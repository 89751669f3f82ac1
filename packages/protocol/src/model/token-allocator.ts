/**
 * Where tokens come from. In production: etcd revisions (the coordinator's owner-key create
 * revision), which are durable and strictly increasing across coordinator restarts. Never an
 * in-memory counter of a coordinator.
 */
export interface TokenAllocator {
  /** A token strictly greater than every token this allocator returned before. */
  next(): bigint;
}

/**
 * A counter that stands for a durable, trusted allocator (like etcd's revision) in the model: it
 * outlives any one lease table, as etcd outlives a coordinator.
 */
export class SequenceAllocator implements TokenAllocator {
  #last: bigint;

  constructor(start = 0n) {
    this.#last = start;
  }

  next(): bigint {
    this.#last += 1n;
    return this.#last;
  }

  get last(): bigint {
    return this.#last;
  }
}
