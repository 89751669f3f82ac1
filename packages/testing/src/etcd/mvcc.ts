/**
 * The multi-version key space of the in-memory etcd: every key keeps its versions (create / mod
 * revision, version, lease) so that past revisions are readable until compacted, and txn compares
 * are judged as etcd judges them (a missing key compares as all zeros; a range compare holds when
 * it holds for every key under the prefix, an empty range compares as one missing key).
 *
 * Pure bookkeeping: no clock, no timers, no leases (the cluster, `memory-etcd.ts`, owns those).
 */
import type { Compare, KeyValue } from '@leasehold/coordinator';

/** Bytes a key-value costs in a reply besides its key and value (revisions, version, lease, framing). */
export const KV_OVERHEAD_BYTES = 32;

/** A missing key, as etcd compares it. */
export const EMPTY: KeyValue = { key: '', value: '', createRevision: 0n, modRevision: 0n, version: 0n, lease: '0' };

interface Version {
  readonly revision: bigint;
  /** undefined: deleted at `revision`. */
  readonly kv: KeyValue | undefined;
}

/** Bytes of keys and values in a reply (the client's receive limit is judged on it). */
export function replyBytes(kvs: readonly KeyValue[]): number {
  let bytes = 0;
  for (const kv of kvs) bytes += kv.key.length + kv.value.length + KV_OVERHEAD_BYTES;
  return bytes;
}

/** What a retained version costs the store. */
function versionBytes(key: string, version: Version | undefined): number {
  return version === undefined ? 0 : key.length + (version.kv?.value.length ?? 0) + KV_OVERHEAD_BYTES;
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

/** One compare against one key (or the all-zeros missing key). */
export function compareValue(c: Compare, kv: KeyValue): boolean {
  if (c.target === 'lease') return order(BigInt(kv.lease), BigInt(c.value), c.result);
  const got = c.target === 'create' ? kv.createRevision : c.target === 'mod' ? kv.modRevision : kv.version;
  return order(got, BigInt(c.value), c.result);
}

export class VersionStore {
  readonly #versions = new Map<string, Version[]>();
  /** Bytes of every retained version (the "database size"). */
  #sizeBytes = 0;

  get sizeBytes(): number {
    return this.#sizeBytes;
  }

  /** The key as it was at `revision` (undefined: absent then). */
  at(key: string, revision: bigint): KeyValue | undefined {
    const versions = this.#versions.get(key);
    if (versions === undefined) return undefined;
    for (let i = versions.length - 1; i >= 0; i -= 1) {
      const v = versions[i];
      if (v !== undefined && v.revision <= revision) return v.kv;
    }
    return undefined;
  }

  /** Every key under `prefix` alive at `revision`, in key order. */
  liveKeys(prefix: string, revision: bigint): KeyValue[] {
    const out: KeyValue[] = [];
    for (const key of this.#versions.keys()) {
      if (!key.startsWith(prefix)) continue;
      const kv = this.at(key, revision);
      if (kv !== undefined) out.push(kv);
    }
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  /** Does compare `c` hold at `revision`? */
  holds(c: Compare, revision: bigint): boolean {
    if (c.prefix !== true) return compareValue(c, this.at(c.key, revision) ?? EMPTY);
    const kvs = this.liveKeys(c.key, revision);
    if (kvs.length === 0) return compareValue(c, EMPTY);
    return kvs.every((kv) => compareValue(c, kv));
  }

  /** Record `kv` (undefined: a delete) as the key's version at `revision`. */
  write(key: string, revision: bigint, kv: KeyValue | undefined): void {
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

  /** Drop every version older than the one each key had at `revision` (deleted keys go entirely). */
  compact(revision: bigint): void {
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
  }
}
