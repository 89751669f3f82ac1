/**
 * The base of a {@link KvBackend} decorator: every call goes to `inner` as it is; a decorator
 * overrides the calls it changes (`CombiningBackend` and `QuotaGuardBackend` change `txn` only).
 */
import type {
  BackendStatus,
  KeyRange,
  KvBackend,
  LeaseKeeper,
  LeaseKeeperOptions,
  RangeOptions,
  RangePage,
  TxnOptions,
  TxnResult,
  TxnSpec,
  WatchHandle,
  WatchListener,
} from './backend.js';

export class ForwardingBackend implements KvBackend {
  protected readonly inner: KvBackend;

  constructor(inner: KvBackend) {
    this.inner = inner;
  }

  txn(spec: TxnSpec, options?: TxnOptions): Promise<TxnResult> {
    return this.inner.txn(spec, options);
  }

  range(prefix: string, options: RangeOptions): Promise<RangePage> {
    return this.inner.range(prefix, options);
  }

  status(): Promise<BackendStatus> {
    return this.inner.status();
  }

  grantLease(ttlSeconds: number): Promise<string> {
    return this.inner.grantLease(ttlSeconds);
  }

  revokeLease(leaseId: string): Promise<void> {
    return this.inner.revokeLease(leaseId);
  }

  leaseKeeper(options: LeaseKeeperOptions): LeaseKeeper {
    return this.inner.leaseKeeper(options);
  }

  watch(range: KeyRange, fromRevision: bigint, listener: WatchListener): Promise<WatchHandle> {
    return this.inner.watch(range, fromRevision, listener);
  }

  close(): void {
    this.inner.close();
  }
}
