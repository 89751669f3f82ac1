/**
 * One coordinator's client of a `MemoryEtcd` (through its {@link MemoryCluster} seam): the coordinator's `KvBackend` port, with the
 * faults a test sets per client — `down` (every call fails, as in a partition), a paused watch (a
 * stale index), `loseNextReply` (a txn applied whose reply is lost) and `refuseAll` (etcd answers,
 * but says no), held txns (`holdNextTxns`: requests in flight until released) — and the client's
 * receive limit (`maxResponseBytes`).
 */
import {
  EtcdRefusedError,
  EtcdUnavailableError,
  type BackendStatus,
  type EtcdFailure,
  type KeyRange,
  type KeyValue,
  type KvBackend,
  type LeaseKeeper,
  type LeaseKeeperOptions,
  type RangeOptions,
  type RangePage,
  type Timers,
  type TxnResult,
  type TxnSpec,
  type WatchHandle,
  type WatchListener,
} from '@leasehold/coordinator';
import type { MemoryClientOptions, MemoryCluster } from './memory-cluster.js';
import { MemoryLeaseKeeper } from './memory-lease-keeper.js';
import { replyBytes } from './mvcc.js';

export class MemoryBackend implements KvBackend {
  readonly cluster: MemoryCluster;
  /** Every call fails with a transient UNAVAILABLE (a partition between this client and etcd). */
  down = false;
  /** Watch events are held back (this client's index goes stale) until `resumeWatch()`. */
  watchPaused = false;
  /** The next txn is applied, but its caller gets an error (the reply was lost). */
  loseNextReply = false;
  /** Every call is answered with this refusal (permission denied, …): etcd answers, but says no. */
  refuseAll: Exclude<EtcdFailure, 'unavailable'> | undefined;
  readonly #timers: Timers;
  readonly #maxResponseBytes: number;
  #toHold = 0;
  #held: (() => void)[] = [];

  constructor(cluster: MemoryCluster, options: MemoryClientOptions = {}) {
    this.cluster = cluster;
    // The keepers use the cluster's timers (one time authority in tests).
    this.#timers = cluster.timers;
    this.#maxResponseBytes = options.maxResponseBytes ?? Number.POSITIVE_INFINITY;
  }

  /** The client's receive limit, as gRPC's: the reply was sent, but this call fails. */
  #received<T>(what: string, kvs: readonly KeyValue[], value: T): T {
    const bytes = replyBytes(kvs);
    if (bytes > this.#maxResponseBytes) {
      throw new EtcdRefusedError(
        'response-too-large',
        `etcd ${what} failed: RESOURCE_EXHAUSTED: Received message larger than max (${bytes} vs ${this.#maxResponseBytes})`,
      );
    }
    return value;
  }

  #check(what: string): void {
    if (this.down)
      throw new EtcdUnavailableError(`etcd ${what} failed: unreachable (memory partition)`, { transient: true });
    if (this.refuseAll !== undefined) throw new EtcdRefusedError(this.refuseAll, `etcd ${what} refused (memory fault)`);
  }

  /** The next `n` txns stay in flight, not yet applied, until {@link releaseHeld}. */
  holdNextTxns(n: number): void {
    this.#toHold = n;
  }

  /** Txns held in flight now. */
  get heldTxns(): number {
    return this.#held.length;
  }

  /** Let every held txn reach etcd (in the order they were sent). */
  releaseHeld(): void {
    const held = this.#held;
    this.#held = [];
    for (const go of held) go();
  }

  txn(spec: TxnSpec): Promise<TxnResult> {
    if (this.#toHold > 0) {
      this.#toHold -= 1;
      return new Promise<void>((go) => this.#held.push(go)).then(() => this.#apply(spec));
    }
    return this.#apply(spec);
  }

  #apply(spec: TxnSpec): Promise<TxnResult> {
    return Promise.resolve().then(() => {
      this.#check('txn');
      const result = this.cluster.txn(spec);
      if (this.loseNextReply) {
        this.loseNextReply = false;
        throw new EtcdUnavailableError('etcd txn failed: reply lost (memory fault)', { transient: true });
      }
      return this.#received(
        'txn',
        result.responses.flatMap((r) => r.kvs),
        result,
      );
    });
  }

  range(prefix: string, options: RangeOptions): Promise<RangePage> {
    return Promise.resolve().then(() => {
      this.#check('range');
      const page = this.cluster.range(prefix, options);
      return this.#received('range', page.kvs, page);
    });
  }

  status(): Promise<BackendStatus> {
    return Promise.resolve().then(() => {
      this.#check('status');
      return this.cluster.status();
    });
  }

  grantLease(ttlSeconds: number): Promise<string> {
    return Promise.resolve().then(() => {
      this.#check('lease grant');
      return this.cluster.grantLease(ttlSeconds);
    });
  }

  revokeLease(leaseId: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.#check('lease revoke');
      this.cluster.revokeLease(leaseId);
    });
  }

  leaseKeeper(options: LeaseKeeperOptions): LeaseKeeper {
    return new MemoryLeaseKeeper(this, this.#timers, options);
  }

  watch(range: KeyRange, fromRevision: bigint, listener: WatchListener): Promise<WatchHandle> {
    return Promise.resolve().then(() => {
      this.#check('watch');
      return this.cluster.watch(this, range, fromRevision, listener);
    });
  }

  /** Hold this client's watch events back (stale index). */
  pauseWatch(): void {
    this.watchPaused = true;
  }

  /** Deliver what was held back. */
  resumeWatch(): void {
    this.watchPaused = false;
    this.cluster.deliver();
  }

  close(): void {
    // nothing to release
  }
}
