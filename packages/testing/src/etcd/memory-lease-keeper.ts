/**
 * The keepalive loop of a `MemoryBackend` (`memory-backend.ts`): every added lease is refreshed on
 * the cluster each interval, on the cluster's timers; a lease the cluster no longer has is dropped
 * and reported through `onLost`, and a client that is `down` refreshes nothing (its leases expire).
 */
import type { LeaseKeeper, LeaseKeeperOptions, TimerHandle, Timers } from '@leasehold/coordinator';
import type { MemoryCluster } from './memory-cluster.js';

/** What the keeper reads of its client: its fault switch and its cluster. */
export interface KeepingClient {
  readonly down: boolean;
  readonly cluster: Pick<MemoryCluster, 'keepAlive'>;
}

/** Keepalive for a `MemoryBackend`: refreshes every added lease each interval. */
export class MemoryLeaseKeeper implements LeaseKeeper {
  readonly #client: KeepingClient;
  readonly #timers: Timers;
  readonly #options: LeaseKeeperOptions;
  readonly #leases = new Set<string>();
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(client: KeepingClient, timers: Timers, options: LeaseKeeperOptions) {
    this.#client = client;
    this.#timers = timers;
    this.#options = options;
  }

  start(): void {
    this.#arm();
  }

  add(leaseId: string): void {
    this.#leases.add(leaseId);
    this.#refresh(leaseId);
  }

  remove(leaseId: string): void {
    this.#leases.delete(leaseId);
  }

  get size(): number {
    return this.#leases.size;
  }

  get connected(): boolean {
    return !this.#client.down;
  }

  close(): void {
    this.#closed = true;
    this.#timers.clearTimeout(this.#timer);
  }

  #arm(): void {
    if (this.#closed) return;
    this.#timer = this.#timers.setTimeout(() => {
      for (const id of [...this.#leases]) this.#refresh(id);
      this.#arm();
    }, this.#options.intervalMs);
  }

  #refresh(leaseId: string): void {
    if (this.#client.down || !this.#leases.has(leaseId)) return;
    if (!this.#client.cluster.keepAlive(leaseId)) {
      this.#leases.delete(leaseId);
      this.#options.onLost(leaseId);
    }
  }
}
