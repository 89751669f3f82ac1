/**
 * What a {@link MemoryBackend} (one coordinator's client, `memory-backend.ts`) asks of the
 * in-memory cluster it is connected to, and what the cluster asks back of a watching client:
 * the seam between `memory-etcd.ts` (the cluster, which creates clients) and `memory-backend.ts`
 * (the client, which calls the cluster), so neither imports the other's module for its types.
 */
import type {
  BackendStatus,
  KeyRange,
  RangeOptions,
  RangePage,
  Timers,
  TxnResult,
  TxnSpec,
  WatchHandle,
  WatchListener,
} from '@leasehold/coordinator';

export interface MemoryClientOptions {
  /** The client's receive limit (ETCD_MAX_RESPONSE_BYTES); default: none. */
  readonly maxResponseBytes?: number;
}

/** What a watch asks of its client: whether it holds events back now. */
export interface WatchingClient {
  readonly watchPaused: boolean;
  readonly down: boolean;
}

/** The cluster's operations a client calls (synchronous: the client adds the faults and the await). */
export interface MemoryCluster {
  /** The time authority of the cluster (lease expiry, client keepalives). */
  readonly timers: Timers;
  txn(spec: TxnSpec): TxnResult;
  range(prefix: string, options: RangeOptions): RangePage;
  status(): BackendStatus;
  grantLease(ttlSeconds: number): string;
  revokeLease(leaseId: string): void;
  /** True when the lease exists (its TTL restarts), false when it is gone. */
  keepAlive(leaseId: string): boolean;
  watch(client: WatchingClient, range: KeyRange, fromRevision: bigint, listener: WatchListener): WatchHandle;
  /** Deliver pending watch events to every client that does not hold them back. */
  deliver(): void;
}
