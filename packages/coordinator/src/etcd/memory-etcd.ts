/**
 * An in-memory etcd with the semantics the coordinator relies on, for fast deterministic tests of
 * the real services and transactions (no mock of leasehold logic: the same {@link TxnSpec}s run
 * here as on etcd; `backend.contract.ts` runs one suite against both).
 *
 * - MVCC: one store revision, bumped once per txn that changes something; every key keeps
 *   create_revision, mod_revision, version and lease; past revisions are readable until compacted.
 * - Txn: compares (create / mod / version / lease; a range compare holds for every key under the
 *   prefix, an empty range compares as one missing key), then success or failure ops applied in
 *   order at one revision; a put to a missing lease fails the whole txn; at most 128 ops per list.
 * - Leases: TTL in seconds, judged by the injected clock; keepalive resets it; revoke or expiry
 *   deletes every attached key at one revision.
 * - Watch: from any retained revision, events grouped by revision, delivered after the txn's reply
 *   (setImmediate); a watch needing a compacted revision is cancelled with an error.
 *
 * - Limits: a txn request over `maxRequestBytes` (etcd's --max-request-bytes, 1.5 MiB) is refused;
 *   a reply over the client's `maxResponseBytes` (the gRPC receive limit) fails that call with
 *   `response-too-large` (sizes count keys and values plus {@link KV_OVERHEAD_BYTES} per key);
 *   with `quotaBytes` (etcd's --quota-backend-bytes) a write that would grow the store past it
 *   raises the NOSPACE alarm, and while it is raised every txn with a put and every lease grant is
 *   refused with `no-space` (reads, deletes and keepalives work) until {@link MemoryEtcd.disarm}.
 *   The store's size is the bytes of every retained version (compaction frees them).
 *
 * {@link MemoryEtcd} is the cluster; {@link MemoryEtcd.connect} gives one client ({@link MemoryBackend})
 * per coordinator, with its own faults: `down` (every call fails, as in a partition), watch pause
 * (a stale index), and `loseNextReply` (a txn applied whose reply is lost).
 */
import type { Clock } from '@leasehold/protocol';
import type { TimerHandle, Timers } from '../core/timers.js';
import { EtcdRefusedError, EtcdUnavailableError, type EtcdFailure } from '../errors.js';
import {
  inRange,
  type BackendStatus,
  type Compare,
  type KeyRange,
  type KeyValue,
  type KvBackend,
  type LeaseKeeper,
  type LeaseKeeperOptions,
  type Op,
  type OpResult,
  type RangeOptions,
  type RangePage,
  type TxnResult,
  type TxnSpec,
  type WatchEvent,
  type WatchHandle,
  type WatchListener,
} from './backend.js';

/** etcd's default `--max-txn-ops`. */
export const MEMORY_MAX_TXN_OPS = 128;
/** etcd's default `--max-request-bytes`. */
export const MEMORY_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
/** Bytes a key-value costs in a reply besides its key and value (revisions, version, lease, framing). */
export const KV_OVERHEAD_BYTES = 32;

function replyBytes(kvs: readonly KeyValue[]): number {
  let bytes = 0;
  for (const kv of kvs) bytes += kv.key.length + kv.value.length + KV_OVERHEAD_BYTES;
  return bytes;
}

interface Version {
  readonly revision: bigint;
  /** undefined: deleted at `revision`. */
  readonly kv: KeyValue | undefined;
}

interface Lease {
  readonly ttlMs: number;
  deadlineMs: number;
  readonly keys: Set<string>;
}

interface Watcher {
  readonly range: KeyRange;
  readonly listener: WatchListener;
  readonly client: MemoryBackend;
  /** Next revision to deliver. */
  nextRevision: bigint;
  cancelled: boolean;
}

const EMPTY: KeyValue = { key: '', value: '', createRevision: 0n, modRevision: 0n, version: 0n, lease: '0' };

function compareValue(c: Compare, kv: KeyValue): boolean {
  if (c.target === 'lease') {
    const got = BigInt(kv.lease);
    const want = BigInt(c.value);
    return order(got, want, c.result);
  }
  const got = c.target === 'create' ? kv.createRevision : c.target === 'mod' ? kv.modRevision : kv.version;
  return order(got, BigInt(c.value), c.result);
}

function order(got: bigint, want: bigint, result: Compare['result']): boolean {
  switch (result) {
    case 'equal':
      return got === want;
    case 'greater':
      return got > want;
    case 'less':
      return got < want;
    case 'not-equal':
      return got !== want;
  }
}

export interface MemoryEtcdOptions {
  readonly clock: Clock;
  readonly timers: Timers;
  /** etcd's --quota-backend-bytes; default: none. */
  readonly quotaBytes?: number;
  /** etcd's --max-request-bytes; default 1.5 MiB. */
  readonly maxRequestBytes?: number;
}

export interface MemoryClientOptions {
  /** The client's receive limit (ETCD_MAX_RESPONSE_BYTES); default: none. */
  readonly maxResponseBytes?: number;
}

export class MemoryEtcd {
  readonly #clock: Clock;
  readonly #timers: Timers;
  #revision = 1n;
  #compacted = 0n;
  readonly #versions = new Map<string, Version[]>();
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
  /** Bytes of every retained version (the "database size"). */
  #sizeBytes = 0;
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
    return { dbSizeBytes: this.#sizeBytes, noSpaceAlarm: this.#noSpace };
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
    return this.#liveKeys(prefix, this.#revision);
  }

  get(key: string): KeyValue | undefined {
    return this.#at(key, this.#revision);
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
    for (const [key, versions] of this.#versions) {
      let keep = versions.length - 1;
      while (keep > 0 && (versions[keep]?.revision ?? 0n) > revision) keep -= 1;
      const kept = versions.slice(keep);
      for (const dropped of versions.slice(0, keep)) this.#sizeBytes -= versionBytes(key, dropped);
      if (kept.length === 1 && kept[0]?.kv === undefined) {
        this.#sizeBytes -= versionBytes(key, kept[0]);
        this.#versions.delete(key);
      } else this.#versions.set(key, kept);
    }
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
    for (const list of [spec.compare, spec.success, spec.failure ?? []]) {
      if (list.length > MEMORY_MAX_TXN_OPS) {
        throw new EtcdRefusedError('too-many-ops', 'etcdserver: too many operations in txn request');
      }
    }
    let requestBytes = 0;
    let writeBytes = 0;
    for (const o of [...spec.success, ...(spec.failure ?? [])]) {
      requestBytes += o.key.length + (o.type === 'put' ? o.value.length : 0) + 8;
    }
    for (const c of spec.compare) requestBytes += c.key.length + 16;
    for (const o of spec.success) if (o.type === 'put') writeBytes += o.key.length + o.value.length;
    if (requestBytes > this.#maxRequestBytes) {
      throw new EtcdRefusedError('request-too-large', 'etcdserver: request is too large');
    }
    // etcd's quota check: a txn that puts anything is refused while the alarm is raised, and
    // raises it when it would grow the store past the quota; puts-free txns pass.
    const puts = [...spec.success, ...(spec.failure ?? [])].some((o) => o.type === 'put');
    if (puts && (this.#noSpace || this.#sizeBytes + writeBytes >= this.#quotaBytes)) {
      this.#noSpace = true;
      throw new EtcdRefusedError('no-space', 'etcdserver: mvcc: database space exceeded');
    }
    const succeeded = spec.compare.every((c) => this.#holds(c));
    const ops = succeeded ? spec.success : (spec.failure ?? []);
    for (const o of ops) {
      if (o.type === 'put' && o.lease !== undefined && o.lease !== '0' && !this.#leases.has(o.lease)) {
        throw new EtcdRefusedError('lease-not-found', 'etcdserver: requested lease not found');
      }
    }
    const next = this.#revision + 1n;
    const events: WatchEvent[] = [];
    const responses: OpResult[] = [];
    for (const o of ops) responses.push(this.#apply(o, next, events));
    if (events.length > 0) this.#commit(next, events);
    return { succeeded, revision: this.#revision, responses };
  }

  range(prefix: string, options: RangeOptions): RangePage {
    this.expire();
    const revision = options.revision ?? this.#revision;
    if (revision < this.#compacted) {
      throw new EtcdRefusedError('compacted', 'mvcc: required revision has been compacted');
    }
    const from = options.fromKey ?? prefix;
    const all = this.#liveKeys(prefix, revision).filter((kv) => kv.key >= from);
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

  watch(client: MemoryBackend, range: KeyRange, fromRevision: bigint, listener: WatchListener): WatchHandle {
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

  #at(key: string, revision: bigint): KeyValue | undefined {
    const versions = this.#versions.get(key);
    if (versions === undefined) return undefined;
    for (let i = versions.length - 1; i >= 0; i -= 1) {
      const v = versions[i];
      if (v !== undefined && v.revision <= revision) return v.kv;
    }
    return undefined;
  }

  #liveKeys(prefix: string, revision: bigint): KeyValue[] {
    const out: KeyValue[] = [];
    for (const key of this.#versions.keys()) {
      if (!key.startsWith(prefix)) continue;
      const kv = this.#at(key, revision);
      if (kv !== undefined) out.push(kv);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  #holds(c: Compare): boolean {
    if (c.prefix !== true) return compareValue(c, this.#at(c.key, this.#revision) ?? EMPTY);
    const kvs = this.#liveKeys(c.key, this.#revision);
    if (kvs.length === 0) return compareValue(c, EMPTY);
    return kvs.every((kv) => compareValue(c, kv));
  }

  /** Apply one op at revision `next` (visible to later ops of the same txn). */
  #apply(o: Op, next: bigint, events: WatchEvent[]): OpResult {
    switch (o.type) {
      case 'get': {
        const kvs = o.prefix === true ? this.#liveKeys(o.key, next) : [this.#at(o.key, next)].filter(isKv);
        return { kvs };
      }
      case 'put': {
        const before = this.#at(o.key, next);
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
        this.#write(o.key, next, kv);
        events.push({ type: 'put', kv });
        return { kvs: [] };
      }
      case 'delete': {
        const kvs = o.prefix === true ? this.#liveKeys(o.key, next) : [this.#at(o.key, next)].filter(isKv);
        for (const kv of kvs) this.#delete(kv, next, events);
        return { kvs: [] };
      }
    }
  }

  #delete(kv: KeyValue, revision: bigint, events: WatchEvent[]): void {
    if (kv.lease !== '0') this.#leases.get(kv.lease)?.keys.delete(kv.key);
    this.#write(kv.key, revision, undefined);
    events.push({ type: 'delete', kv: { ...EMPTY, key: kv.key, modRevision: revision } });
  }

  #write(key: string, revision: bigint, kv: KeyValue | undefined): void {
    const versions = this.#versions.get(key) ?? [];
    const last = versions.at(-1);
    const version = { revision, kv };
    if (last?.revision === revision) {
      this.#sizeBytes -= versionBytes(key, last);
      versions[versions.length - 1] = version;
    } else versions.push(version);
    this.#sizeBytes += versionBytes(key, version);
    this.#versions.set(key, versions);
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
      const kv = this.#at(key, next);
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

/** What a retained version costs the store. */
function versionBytes(key: string, version: Version | undefined): number {
  return version === undefined ? 0 : key.length + (version.kv?.value.length ?? 0) + KV_OVERHEAD_BYTES;
}

/** One coordinator's connection to a {@link MemoryEtcd}. */
export class MemoryBackend implements KvBackend {
  readonly cluster: MemoryEtcd;
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

  constructor(cluster: MemoryEtcd, options: MemoryClientOptions = {}) {
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

  txn(spec: TxnSpec): Promise<TxnResult> {
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

/** Keepalive for a {@link MemoryBackend}: refreshes every added lease each interval. */
class MemoryLeaseKeeper implements LeaseKeeper {
  readonly #client: MemoryBackend;
  readonly #timers: Timers;
  readonly #options: LeaseKeeperOptions;
  readonly #leases = new Set<string>();
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(client: MemoryBackend, timers: Timers, options: LeaseKeeperOptions) {
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
