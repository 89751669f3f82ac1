/**
 * The etcd semantics the coordinator relies on, as one small interface with two implementations:
 * {@link EtcdBackend} (a real etcd through etcd3) and `MemoryBackend` of `@leasehold/testing` (an
 * in-memory MVCC store with the same revisions, leases, txn compares and watch). Every transaction of the coordinator
 * (`transactions/*.ts`) is built once, as a {@link TxnSpec}, and runs unchanged on either, so a
 * unit test over the memory backend exercises the very compares that run in production; the
 * backend contract suite (`testing/backend-contract.ts`) holds the memory backend to etcd's answers.
 *
 * No etcd3 type appears here: keys and values are strings, revisions and lease ids bigint / string.
 */

/** One key as etcd returns it. A missing key compares as all zeros (etcd's rule). */
export interface KeyValue {
  readonly key: string;
  readonly value: string;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
  readonly version: bigint;
  /** Lease id as a decimal string; '0' = no lease. */
  readonly lease: string;
}

export type CompareTarget = 'create' | 'mod' | 'version' | 'lease';
export type CompareResult = 'equal' | 'greater' | 'less' | 'not-equal';

/**
 * A txn compare on one key, or (with `prefix`) on every key under a prefix: a range compare holds
 * when it holds for every key in the range, and an empty range compares as one missing key.
 */
export interface Compare {
  readonly key: string;
  readonly prefix?: boolean;
  readonly target: CompareTarget;
  readonly result: CompareResult;
  /** A revision / version, or a lease id (decimal string, '0' = none). */
  readonly value: bigint | string;
}

/**
 * One op of a txn branch. A `txn` op is a nested txn (etcd ≥ 3.3): its compares are judged, with
 * every other compare of the request, on the store as it was before the request, and only its own
 * branch runs — so several independent conditional writes share one request and one revision, and
 * one that fails its compares does not fail the others. etcd refuses a request that puts (or puts
 * and deletes) one key in two places, nested or not, and bounds each level's ops by what the levels
 * above it left of `--max-txn-ops`.
 */
export type Op =
  | { readonly type: 'put'; readonly key: string; readonly value: string; readonly lease?: string }
  | { readonly type: 'get'; readonly key: string; readonly prefix?: boolean }
  | { readonly type: 'delete'; readonly key: string; readonly prefix?: boolean }
  | { readonly type: 'txn'; readonly txn: TxnSpec };

export interface TxnSpec {
  readonly compare: readonly Compare[];
  readonly success: readonly Op[];
  readonly failure?: readonly Op[];
}

/** A nested txn's outcome: which branch ran, and its ops' results. */
export interface NestedResult {
  readonly succeeded: boolean;
  readonly responses: readonly OpResult[];
}

/** Per op, in order: the keys a `get` found (empty for put / delete); for a `txn` op, its outcome. */
export interface OpResult {
  readonly kvs: readonly KeyValue[];
  readonly txn?: NestedResult;
}

/** How a write txn is sent. */
export interface TxnOptions {
  /**
   * Takeover and expiry work: sent at once as a request of its own, never held back to share a
   * request with other txns (etcd/combining-backend.ts) nor queued behind one in flight.
   */
  readonly urgent?: boolean;
  /**
   * At most this many bytes of values the txn's gets return, when that may be more than a task
   * record's bound per get (a grant reads payloads): a combined request keeps its reply within the
   * client's receive limit by it.
   */
  readonly replyBytes?: number;
}

export interface TxnResult {
  readonly succeeded: boolean;
  /** The store's revision after the txn (the txn's own revision when it wrote). */
  readonly revision: bigint;
  readonly responses: readonly OpResult[];
}

export interface RangePage {
  readonly kvs: readonly KeyValue[];
  readonly more: boolean;
  readonly revision: bigint;
}

export interface RangeOptions {
  /** First key (inclusive); default the prefix itself. */
  readonly fromKey?: string;
  readonly limit: number;
  /** Read at this past revision. */
  readonly revision?: bigint;
}

export interface WatchEvent {
  readonly type: 'put' | 'delete';
  /** For a delete: key and modRevision (the deletion revision) only. */
  readonly kv: KeyValue;
}

export interface WatchListener {
  /** Events in revision order (all events of a revision together), then the response's header revision. */
  onEvents(events: readonly WatchEvent[], headerRevision: bigint): void;
  /** The watch is over (cancelled, compacted, failed): the caller rebuilds. */
  onError(err: unknown): void;
  /** The stream dropped and is being resumed by the backend (informational). */
  onDisconnected?(err: unknown): void;
}

export interface WatchHandle {
  cancel(): Promise<void>;
}

/** Keys from `start` (inclusive) up to the end of prefix `endPrefix` (every key starting with it). */
export interface KeyRange {
  readonly start: string;
  readonly endPrefix: string;
}

export interface LeaseKeeperOptions {
  readonly intervalMs: number;
  /** The lease no longer exists in the store (expired or revoked): called once per lease. */
  readonly onLost: (leaseId: string) => void;
}

/** Keeps a set of leases alive (one stream for all of them on etcd). */
export interface LeaseKeeper {
  start(): void;
  add(leaseId: string): void;
  remove(leaseId: string): void;
  readonly size: number;
  /** The keepalive channel is up (or not needed). */
  readonly connected: boolean;
  close(): void;
}

/** What the store says about its own size (etcd: Maintenance.Status of the member asked). */
export interface BackendStatus {
  /** Bytes of the backend database as allocated (what etcd's quota is judged on). */
  readonly dbSizeBytes: number;
  /** etcd's NOSPACE alarm is raised: writes are refused until an operator disarms it. */
  readonly noSpaceAlarm: boolean;
}

export interface KvBackend {
  /** Run one transaction, once (never retried: a lost reply leaves the outcome unknown). Throws on failure. */
  txn(spec: TxnSpec, options?: TxnOptions): Promise<TxnResult>;
  /** One page of keys under `prefix`, in key order. Idempotent. */
  range(prefix: string, options: RangeOptions): Promise<RangePage>;
  /** The size of the store and its quota alarm (etcd: Maintenance.Status, allowed for a non-root user). */
  status(): Promise<BackendStatus>;
  /** A fresh lease of `ttlSeconds`; its id as a decimal string. */
  grantLease(ttlSeconds: number): Promise<string>;
  /** Revoke a lease: every key attached to it is deleted at one revision. Idempotent. */
  revokeLease(leaseId: string): Promise<void>;
  leaseKeeper(options: LeaseKeeperOptions): LeaseKeeper;
  /** Watch `range` from `fromRevision` (inclusive). */
  watch(range: KeyRange, fromRevision: bigint, listener: WatchListener): Promise<WatchHandle>;
  close(): void;
}

/** True when `key` lies in `range`. */
export function inRange(key: string, range: KeyRange): boolean {
  return key >= range.start && (key < range.endPrefix || key.startsWith(range.endPrefix));
}
