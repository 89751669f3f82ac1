/**
 * An in-memory etcd with the semantics the coordinator relies on, for fast deterministic tests of
 * the real services and transactions (no mock of leasehold logic: the same `TxnSpec`s run here as
 * on etcd; the coordinator's backend contract suite runs one suite against both).
 *
 * - MVCC: one store revision, bumped once per txn that changes something; every key keeps
 *   create_revision, mod_revision, version and lease; past revisions are readable until compacted
 *   ({@link VersionStore}).
 * - Txn: compares (create / mod / version / lease; a range compare holds for every key under the
 *   prefix, an empty range compares as one missing key), then success or failure ops applied in
 *   order at one revision; a put to a missing lease fails the whole txn; at most 128 ops per list.
 *   Nested txns (an op of type `txn`): every compare of the request, nested or not, is judged on
 *   the store before it (etcd's `compareToPath`), each nested txn runs its own branch, and a nested
 *   txn's lists are bounded by what its parent left of the 128 (etcd's `checkTxnRequest`). A
 *   request that puts a key twice, or puts and deletes it, is refused as etcd 3.4's `checkIntervals`
 *   refuses it (`duplicate key given in txn request`; {@link checkDuplicateKeys}), with its
 *   asymmetries: two deletes of a key pass, and so does a nested txn's delete of a key an earlier
 *   sibling put.
 * - Leases: TTL in seconds, judged by the injected clock; keepalive resets it; revoke or expiry
 *   deletes every attached key at one revision.
 * - Watch: from any retained revision, events grouped by revision, delivered after the txn's reply
 *   (setImmediate); a watch needing a compacted revision is cancelled with an error.
 * - Limits: a txn request over `maxRequestBytes` (etcd's --max-request-bytes, 1.5 MiB) is refused;
 *   a reply over the client's `maxResponseBytes` (the gRPC receive limit) fails that call with
 *   `response-too-large` (sizes count keys and values plus {@link KV_OVERHEAD_BYTES} per key);
 *   with `quotaBytes` (etcd's --quota-backend-bytes) a write that would grow the store past it
 *   raises the NOSPACE alarm, and while it is raised every txn with a top-level put and every
 *   lease grant is refused with `no-space` (reads, deletes and keepalives work) until
 *   {@link MemoryEtcd.disarm}. As in etcd 3.4, puts inside nested txns cost nothing against the
 *   quota, so the alarm does not stop them (the coordinator's quota guard makes such requests
 *   count); once they fill the store to the quota every txn is refused.
 *   The store's size is the bytes of every retained version (compaction frees them).
 *
 * {@link MemoryEtcd} is the cluster; {@link MemoryEtcd.connect} gives one client
 * ({@link MemoryBackend}, `memory-backend.ts`) per coordinator, with its own faults.
 */
import {
  EtcdRefusedError,
  inRange,
  requestBytesOf,
  type BackendStatus,
  type KeyRange,
  type KeyValue,
  type Op,
  type OpResult,
  type RangeOptions,
  type RangePage,
  type TimerHandle,
  type Timers,
  type TxnResult,
  type TxnSpec,
  type WatchEvent,
  type WatchHandle,
  type WatchListener,
} from '@leasehold/coordinator';
import type { Clock } from '@leasehold/protocol';
import { MemoryBackend } from './memory-backend.js';
import type { MemoryClientOptions, MemoryCluster, WatchingClient } from './memory-cluster.js';
import { EMPTY, VersionStore } from './mvcc.js';

export { KV_OVERHEAD_BYTES } from './mvcc.js';

/** etcd's default `--max-txn-ops`. */
export const MEMORY_MAX_TXN_OPS = 128;
/** etcd's default `--max-request-bytes`. */
export const MEMORY_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;

/** A txn op that is not a nested txn. */
type LeafOp = Exclude<Op, { readonly type: 'txn' }>;

/** Which branch a txn took, and the path of each nested txn in that branch (by op index). */
interface Path {
  readonly succeeded: boolean;
  readonly nested: ReadonlyMap<number, Path>;
}

function branch(spec: TxnSpec, succeeded: boolean): readonly Op[] {
  return succeeded ? spec.success : (spec.failure ?? []);
}

/**
 * etcd's `--max-txn-ops` check: a txn's compares, success ops and failure ops each at most `max`,
 * and a nested txn's at most what its parent left (`max` less the parent's longest list).
 */
function checkOpCounts(spec: TxnSpec, max: number): void {
  const longest = Math.max(spec.compare.length, spec.success.length, (spec.failure ?? []).length);
  if (longest > max) throw new EtcdRefusedError('too-many-ops', 'etcdserver: too many operations in txn request');
  for (const o of [...spec.success, ...(spec.failure ?? [])]) {
    if (o.type === 'txn') checkOpCounts(o.txn, max - longest);
  }
}

/** What a list of ops writes, as etcd's `checkIntervals` collects it: the keys put, and the deletes. */
interface Writes {
  readonly puts: Set<string>;
  /** Each delete: a key, or a prefix (every key starting with it). */
  readonly dels: { readonly key: string; readonly prefix: boolean }[];
}

function deleted(dels: Writes['dels'], key: string): boolean {
  return dels.some((d) => (d.prefix ? key.startsWith(d.key) : d.key === key));
}

/** The bytes of the puts of one top-level list (keys and values; nested txns not counted). */
function topLevelPutBytes(ops: readonly Op[]): number {
  let bytes = 0;
  for (const o of ops) if (o.type === 'put') bytes += o.key.length + o.value.length;
  return bytes;
}

/**
 * etcd 3.4's `checkIntervals`, run on a txn's success ops and on its failure ops: a key put twice
 * in one list (nested lists included), or put where a delete of the same list or of an earlier
 * nested txn reaches, is refused. The two branches of one nested txn may put the same key (only one
 * runs). A delete is checked against nothing: two deletes of a key pass, and so does a nested
 * txn's delete of a key an earlier sibling put (etcd checks a level's deletes only against the
 * puts it meets after them).
 */
function checkDuplicateKeys(ops: readonly Op[]): Writes {
  const dels: Writes['dels'] = [];
  for (const o of ops) if (o.type === 'delete') dels.push({ key: o.key, prefix: o.prefix === true });
  const puts = new Set<string>();
  const refuse = (): never => {
    throw new EtcdRefusedError('duplicate-key', 'etcdserver: duplicate key given in txn request');
  };
  for (const o of ops) {
    if (o.type !== 'txn') continue;
    const then = checkDuplicateKeys(o.txn.success);
    const otherwise = checkDuplicateKeys(o.txn.failure ?? []);
    for (const key of then.puts) {
      if (puts.has(key) || deleted(dels, key)) refuse();
      puts.add(key);
    }
    for (const key of otherwise.puts) {
      if ((puts.has(key) && !then.puts.has(key)) || deleted(dels, key)) refuse();
      puts.add(key);
    }
    dels.push(...then.dels, ...otherwise.dels);
  }
  for (const o of ops) {
    if (o.type !== 'put') continue;
    if (puts.has(o.key) || deleted(dels, o.key)) refuse();
    puts.add(o.key);
  }
  return { puts, dels };
}

/** The ops `path` runs, nested ones included. */
function* pathOps(spec: TxnSpec, path: Path): Generator<LeafOp> {
  const ops = branch(spec, path.succeeded);
  for (let i = 0; i < ops.length; i += 1) {
    const o = ops[i];
    if (o === undefined) continue;
    if (o.type !== 'txn') yield o;
    else {
      const inner = path.nested.get(i);
      if (inner !== undefined) yield* pathOps(o.txn, inner);
    }
  }
}

interface Lease {
  readonly ttlMs: number;
  deadlineMs: number;
  readonly keys: Set<string>;
}

interface Watcher {
  readonly range: KeyRange;
  readonly listener: WatchListener;
  readonly client: WatchingClient;
  /** Next revision to deliver. */
  nextRevision: bigint;
  cancelled: boolean;
}

export interface MemoryEtcdOptions {
  readonly clock: Clock;
  readonly timers: Timers;
  /** etcd's --quota-backend-bytes; default: none. */
  readonly quotaBytes?: number;
  /** etcd's --max-request-bytes; default 1.5 MiB. */
  readonly maxRequestBytes?: number;
}

export class MemoryEtcd implements MemoryCluster {
  readonly #clock: Clock;
  readonly #timers: Timers;
  #revision = 1n;
  #compacted = 0n;
  readonly #store = new VersionStore();
  /** Changes by revision, for watches (oldest first, trimmed at compaction). */
  #log: { readonly revision: bigint; readonly events: WatchEvent[] }[] = [];
  readonly #leases = new Map<string, Lease>();
  #nextLease = 0x7a11n;
  readonly #watchers = new Set<Watcher>();
  #expiryTimer: TimerHandle | undefined;
  #expiryAtMs = Number.POSITIVE_INFINITY;
  #deliveryQueued = false;
  readonly #quotaBytes: number;
  readonly #maxRequestBytes: number;
  #noSpace = false;

  constructor(options: MemoryEtcdOptions) {
    this.#clock = options.clock;
    this.#timers = options.timers;
    this.#quotaBytes = options.quotaBytes ?? Number.POSITIVE_INFINITY;
    this.#maxRequestBytes = options.maxRequestBytes ?? MEMORY_MAX_REQUEST_BYTES;
  }

  /** A client of this cluster (one per coordinator), with its own faults. */
  connect(options: MemoryClientOptions = {}): MemoryBackend {
    return new MemoryBackend(this, options);
  }

  /** Bytes of every retained version, and the NOSPACE alarm. */
  status(): BackendStatus {
    return { dbSizeBytes: this.#store.sizeBytes, noSpaceAlarm: this.#noSpace };
  }

  /** The operator's `etcdctl alarm disarm` (after compacting and defragmenting). */
  disarm(): void {
    this.#noSpace = false;
  }

  get revision(): bigint {
    return this.#revision;
  }

  /** The time authority of this cluster (lease expiry, client keepalives). */
  get timers(): Timers {
    return this.#timers;
  }

  /** Every live key under `prefix`, sorted (a test's view of the store). */
  keys(prefix = ''): KeyValue[] {
    return this.#store.liveKeys(prefix, this.#revision);
  }

  get(key: string): KeyValue | undefined {
    return this.#store.at(key, this.#revision);
  }

  /** Leases alive now. */
  get leaseCount(): number {
    this.expire();
    return this.#leases.size;
  }

  /** Drop history at or below `revision`: watches and ranges needing it fail from now on. */
  compact(revision: bigint): void {
    if (revision <= this.#compacted) return;
    this.#compacted = revision;
    this.#store.compact(revision);
    this.#log = this.#log.filter((entry) => entry.revision >= revision);
    for (const w of this.#watchers) {
      if (!w.cancelled && w.nextRevision < revision) {
        this.#cancelWatcher(w, new Error('mvcc: required revision has been compacted'));
      }
    }
  }

  /** Expire every lease whose deadline has passed (also run before every operation). */
  expire(): void {
    const now = this.#clock.nowMs();
    for (const [id, lease] of this.#leases) {
      if (lease.deadlineMs <= now) this.#dropLease(id);
    }
    this.#scheduleExpiry();
  }

  // --- operations, called by MemoryBackend ------------------------------------------------------

  txn(spec: TxnSpec): TxnResult {
    this.expire();
    checkOpCounts(spec, MEMORY_MAX_TXN_OPS);
    checkDuplicateKeys(spec.success);
    checkDuplicateKeys(spec.failure ?? []);
    const requestBytes = requestBytesOf(spec);
    if (requestBytes > this.#maxRequestBytes) {
      throw new EtcdRefusedError('request-too-large', 'etcdserver: request is too large');
    }
    // etcd 3.4's quota: a txn costs the bytes of the puts of its top-level success or failure list,
    // the larger (quota.go `costTxn`): puts inside nested txns cost nothing. With the alarm raised
    // a txn that costs anything is refused (`applierV3Capped`); any txn is refused, raising the
    // alarm, when the store's size plus its cost reaches the quota (`quotaKVServer`), so deletes
    // pass until nested puts (which the alarm does not stop) have filled the store to the quota.
    const cost = Math.max(topLevelPutBytes(spec.success), topLevelPutBytes(spec.failure ?? []));
    if ((cost > 0 && this.#noSpace) || this.#store.sizeBytes + cost >= this.#quotaBytes) {
      this.#noSpace = true;
      throw new EtcdRefusedError('no-space', 'etcdserver: mvcc: database space exceeded');
    }
    // Every compare, nested ones too, is judged on the store before the txn (etcd's compareToPath).
    const path = this.#judge(spec);
    for (const o of pathOps(spec, path)) {
      if (o.type === 'put' && o.lease !== undefined && o.lease !== '0' && !this.#leases.has(o.lease)) {
        throw new EtcdRefusedError('lease-not-found', 'etcdserver: requested lease not found');
      }
    }
    const next = this.#revision + 1n;
    const events: WatchEvent[] = [];
    const responses = this.#run(spec, path, next, events);
    if (events.length > 0) this.#commit(next, events);
    return { succeeded: path.succeeded, revision: this.#revision, responses };
  }

  /** The branch `spec` and each nested txn of it takes, judged on the store as it is now. */
  #judge(spec: TxnSpec): Path {
    const succeeded = spec.compare.every((c) => this.#store.holds(c, this.#revision));
    const nested = new Map<number, Path>();
    branch(spec, succeeded).forEach((o, i) => {
      if (o.type === 'txn') nested.set(i, this.#judge(o.txn));
    });
    return { succeeded, nested };
  }

  /** Apply the branch `path` chose of `spec` (and of its nested txns) at revision `next`. */
  #run(spec: TxnSpec, path: Path, next: bigint, events: WatchEvent[]): OpResult[] {
    return branch(spec, path.succeeded).map((o, i) => {
      if (o.type !== 'txn') return this.#apply(o, next, events);
      const inner = path.nested.get(i);
      if (inner === undefined) throw new Error('memory etcd: a nested txn was not judged');
      return { kvs: [], txn: { succeeded: inner.succeeded, responses: this.#run(o.txn, inner, next, events) } };
    });
  }

  range(prefix: string, options: RangeOptions): RangePage {
    this.expire();
    const revision = options.revision ?? this.#revision;
    if (revision < this.#compacted) {
      throw new EtcdRefusedError('compacted', 'mvcc: required revision has been compacted');
    }
    const from = options.fromKey ?? prefix;
    const all = this.#store.liveKeys(prefix, revision).filter((kv) => kv.key >= from);
    const kvs = options.limit > 0 ? all.slice(0, options.limit) : all;
    return { kvs, more: kvs.length < all.length, revision: this.#revision };
  }

  grantLease(ttlSeconds: number): string {
    this.expire();
    if (this.#noSpace) throw new EtcdRefusedError('no-space', 'etcdserver: mvcc: database space exceeded');
    this.#nextLease += 0x1d3n;
    const id = this.#nextLease.toString();
    const ttlMs = ttlSeconds * 1_000;
    this.#leases.set(id, { ttlMs, deadlineMs: this.#clock.nowMs() + ttlMs, keys: new Set() });
    this.#scheduleExpiry();
    return id;
  }

  revokeLease(leaseId: string): void {
    this.expire();
    this.#dropLease(leaseId);
  }

  /** Keepalive: true when the lease exists (its TTL restarts), false when it is gone. */
  keepAlive(leaseId: string): boolean {
    this.expire();
    const lease = this.#leases.get(leaseId);
    if (lease === undefined) return false;
    lease.deadlineMs = this.#clock.nowMs() + lease.ttlMs;
    this.#scheduleExpiry();
    return true;
  }

  watch(client: WatchingClient, range: KeyRange, fromRevision: bigint, listener: WatchListener): WatchHandle {
    const watcher: Watcher = { range, listener, client, nextRevision: fromRevision, cancelled: false };
    this.#watchers.add(watcher);
    if (fromRevision < this.#compacted) {
      this.#cancelWatcher(watcher, new Error('mvcc: required revision has been compacted'));
    } else this.#queueDelivery();
    return {
      cancel: () => {
        watcher.cancelled = true;
        this.#watchers.delete(watcher);
        return Promise.resolve();
      },
    };
  }

  /** Deliver pending watch events to every watcher whose client does not hold them back. */
  deliver(): void {
    for (const w of [...this.#watchers]) {
      if (w.cancelled || w.client.watchPaused || w.client.down) continue;
      const events: WatchEvent[] = [];
      for (const entry of this.#log) {
        if (entry.revision < w.nextRevision) continue;
        for (const ev of entry.events) if (inRange(ev.kv.key, w.range)) events.push(ev);
      }
      const header = this.#revision;
      w.nextRevision = header + 1n;
      if (events.length > 0) w.listener.onEvents(events, header);
    }
  }

  // --- internals --------------------------------------------------------------------------------

  #queueDelivery(): void {
    if (this.#deliveryQueued) return;
    this.#deliveryQueued = true;
    setImmediate(() => {
      this.#deliveryQueued = false;
      this.deliver();
    });
  }

  #cancelWatcher(w: Watcher, err: Error): void {
    w.cancelled = true;
    this.#watchers.delete(w);
    setImmediate(() => {
      w.listener.onError(err);
    });
  }

  /** Apply one op at revision `next` (visible to later ops of the same txn). */
  #apply(o: LeafOp, next: bigint, events: WatchEvent[]): OpResult {
    switch (o.type) {
      case 'get': {
        const kvs = o.prefix === true ? this.#store.liveKeys(o.key, next) : [this.#store.at(o.key, next)].filter(isKv);
        return { kvs };
      }
      case 'put': {
        const before = this.#store.at(o.key, next);
        const lease = o.lease ?? '0';
        const kv: KeyValue = {
          key: o.key,
          value: o.value,
          createRevision: before?.createRevision ?? next,
          modRevision: next,
          version: (before?.version ?? 0n) + 1n,
          lease,
        };
        if (before !== undefined && before.lease !== '0') this.#leases.get(before.lease)?.keys.delete(o.key);
        if (lease !== '0') this.#leases.get(lease)?.keys.add(o.key);
        this.#store.write(o.key, next, kv);
        events.push({ type: 'put', kv });
        return { kvs: [] };
      }
      case 'delete': {
        const kvs = o.prefix === true ? this.#store.liveKeys(o.key, next) : [this.#store.at(o.key, next)].filter(isKv);
        for (const kv of kvs) this.#delete(kv, next, events);
        return { kvs: [] };
      }
    }
  }

  #delete(kv: KeyValue, revision: bigint, events: WatchEvent[]): void {
    if (kv.lease !== '0') this.#leases.get(kv.lease)?.keys.delete(kv.key);
    this.#store.write(kv.key, revision, undefined);
    events.push({ type: 'delete', kv: { ...EMPTY, key: kv.key, modRevision: revision } });
  }

  #commit(revision: bigint, events: WatchEvent[]): void {
    this.#revision = revision;
    this.#log.push({ revision, events });
    this.#queueDelivery();
  }

  #dropLease(leaseId: string): void {
    const lease = this.#leases.get(leaseId);
    if (lease === undefined) return;
    this.#leases.delete(leaseId);
    if (lease.keys.size === 0) return;
    const next = this.#revision + 1n;
    const events: WatchEvent[] = [];
    for (const key of [...lease.keys].sort()) {
      const kv = this.#store.at(key, next);
      if (kv !== undefined) this.#delete(kv, next, events);
    }
    if (events.length > 0) this.#commit(next, events);
  }

  #scheduleExpiry(): void {
    let earliest = Number.POSITIVE_INFINITY;
    for (const lease of this.#leases.values()) earliest = Math.min(earliest, lease.deadlineMs);
    if (earliest === this.#expiryAtMs) return;
    this.#timers.clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    this.#expiryAtMs = earliest;
    if (earliest === Number.POSITIVE_INFINITY) return;
    this.#expiryTimer = this.#timers.setTimeout(
      () => {
        this.#expiryTimer = undefined;
        this.#expiryAtMs = Number.POSITIVE_INFINITY;
        this.expire();
      },
      Math.max(0, earliest - this.#clock.nowMs()),
    );
  }
}

function isKv(kv: KeyValue | undefined): kv is KeyValue {
  return kv !== undefined;
}
