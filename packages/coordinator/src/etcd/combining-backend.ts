/**
 * One etcd request for the write txns of every kind that are ready at once (issue 27: "one txn per
 * tick for every kind"). The grant, attempt-end, session-end and submit batchers each send their
 * own txn, so under load a coordinator had three or four requests in flight, each its own raft
 * proposal, gRPC call and reply; etcd's CPU per request is large next to its CPU per op
 * (docs/benchmarks.md, twenty-first step). {@link CombiningBackend} sits under the store: a write
 * txn waits while `maxInFlight` combined requests are running (and, with none running, until the
 * end of the event-loop turn), and then every waiting txn that fits goes as one nested txn of one
 * request. Each caller gets the result its own txn would have had.
 *
 * Why that is the same as sending them one by one. etcd judges every compare of a request, nested
 * or not, on the store as it was before the request, then runs each nested txn's branch in order
 * (a get sees the writes of the nested txns before it). Two txns are combined only when neither
 * writes a key the other reads, compares or writes (prefixes included): then each one's compares
 * and reads see what they would have seen had it run first or second, its writes do not depend on
 * the other, and the request is what running them in either order gives, at one revision. (Only a
 * compare of a key an earlier part writes, and etcd's duplicate-key rule, make the check needed;
 * keeping gets apart too costs a little combining and keeps the rule one line.) Txns sent
 * concurrently had no order before either (etcd may apply two concurrent requests in any order),
 * so a caller loses no guarantee it had; conflicting txns go in separate requests, as before.
 *
 * Limits. A combined request never makes etcd refuse what a lone txn would not: each level's ops
 * stay within `--max-txn-ops` (128: the top level's count plus the deepest need of any part, see
 * {@link opsNeeded}), the request within {@link MAX_COMBINED_REQUEST_BYTES}, and no key is written
 * by two parts (etcd's duplicate-key rule). Its reply stays within the client's receive limit: the
 * txns' reply bounds (`TxnOptions.replyBytes`, a grant's payloads; else {@link GET_REPLY_BYTES} per
 * get) add up to at most half of it, and a write txn with a prefix read (no bound) goes alone.
 *
 * What is combined: a txn that writes (puts or deletes, at any level) and is either a batch of
 * nested txns under a txn without compares and failure ops (as `Kv.txnEach` builds: its nested txns
 * are taken as they are) or any other txn (it becomes one nested txn); nested txns may hold nested
 * txns of their own (a finish carrying a grant). Reads (txns that write nothing), txns with a
 * prefix read (their reply has no bound) and urgent txns (`TxnOptions.urgent`: session ends and
 * takeover grants, which must not wait behind ordinary work) pass straight through, at once. A txn
 * alone in its turn is sent unchanged.
 *
 * Failures. A request that failed in a way that may have applied it (unavailable, a lost or too
 * large reply, anything unknown) fails every txn in it, their outcomes unknown as for any lost
 * reply: nothing is re-sent. A request etcd refused before applying any of it (a lease one txn puts
 * to is gone, the NOSPACE alarm, too many ops, ...) is sent again txn by txn, each getting its own
 * answer, as it would have alone.
 */
import type { Compare, KvBackend, NestedResult, Op, TxnOptions, TxnResult, TxnSpec } from './backend.js';
import { MAX_TASK_RECORD_BYTES } from '../core/task-record.js';
import { EtcdError, type EtcdFailure } from '../errors.js';
import { ForwardingBackend } from './forwarding-backend.js';

/** etcd's default `--max-txn-ops`. */
const MAX_TXN_OPS = 128;

/**
 * The largest request (by {@link requestBytesOf}'s count) combining builds: the largest txn the
 * store sends alone (a submit batch, `MAX_SUBMIT_BYTES_PER_TXN`), well under etcd's
 * `--max-request-bytes` of 1.5 MiB. A txn larger than this by itself is sent alone.
 */
export const MAX_COMBINED_REQUEST_BYTES = 1_200_000;

/**
 * What one get of a write txn may return when the txn says nothing else (`TxnOptions.replyBytes`):
 * a task record (the largest value the coordinator reads in a write txn, other than a grant's
 * payload) and its key.
 */
export const GET_REPLY_BYTES = MAX_TASK_RECORD_BYTES + 1024;

export interface CombiningOptions {
  /** Combined requests running at once (≥ 1). */
  readonly maxInFlight: number;
  /**
   * The most a combined request's reply may carry, by its txns' bounds (`TxnOptions.replyBytes`, or
   * {@link GET_REPLY_BYTES} per get): half the client's receive limit. A txn whose own bound passes
   * it is sent alone.
   */
  readonly maxReplyBytes: number;
  /** Told the number of txns in every combined request sent (1 = a txn sent alone). */
  readonly observe?: (txns: number) => void;
}

/** The keys a txn reads (compares, gets) or writes, exact and by prefix. */
interface Footprint {
  readonly writes: Set<string>;
  readonly writePrefixes: string[];
  readonly touches: Set<string>;
  readonly touchPrefixes: string[];
}

/** A write txn waiting to be sent: the nested txns it becomes, and how its result is rebuilt. */
interface Pending {
  readonly spec: TxnSpec;
  /** The nested txns of the combined request this txn becomes (one for a flat txn). */
  readonly parts: readonly TxnSpec[];
  /** A batch (`Kv.txnEach`'s shape): its result is the parts' results; else the one part's. */
  readonly batch: boolean;
  readonly footprint: Footprint;
  readonly bytes: number;
  /** The most its reply may carry. */
  readonly replyBytes: number;
  /** The most ops any part needs under its parent's count ({@link opsNeeded}). */
  readonly longest: number;
  readonly resolve: (r: TxnResult) => void;
  readonly reject: (e: unknown) => void;
}

function leafOps(ops: readonly Op[], visit: (o: Exclude<Op, { readonly type: 'txn' }>) => void): void {
  for (const o of ops) {
    if (o.type === 'txn') {
      leafOps(o.txn.success, visit);
      leafOps(o.txn.failure ?? [], visit);
    } else visit(o);
  }
}

/** Some op that is not a nested txn, at any depth, of either branch, is one `test` accepts. */
function anyLeaf(ops: readonly Op[], test: (o: Exclude<Op, { readonly type: 'txn' }>) => boolean): boolean {
  return ops.some((o) => (o.type === 'txn' ? anyLeaf([...o.txn.success, ...(o.txn.failure ?? [])], test) : test(o)));
}

function allCompares(spec: TxnSpec, visit: (c: Compare) => void): void {
  for (const c of spec.compare) visit(c);
  for (const o of [...spec.success, ...(spec.failure ?? [])]) if (o.type === 'txn') allCompares(o.txn, visit);
}

/** How many gets `spec` has, in both branches at every level. */
function getsOf(spec: TxnSpec): number {
  let gets = 0;
  leafOps([{ type: 'txn', txn: spec }], (o) => {
    if (o.type === 'get') gets += 1;
  });
  return gets;
}

/**
 * The request size of `spec`, as counted against etcd's `--max-request-bytes` here and by the
 * memory etcd (`@leasehold/testing`): keys and values in UTF-8 bytes (what gRPC sends), 8 bytes
 * per op and 16 per compare.
 */
export function requestBytesOf(spec: TxnSpec): number {
  let bytes = 0;
  leafOps([{ type: 'txn', txn: spec }], (o) => {
    bytes += Buffer.byteLength(o.key) + (o.type === 'put' ? Buffer.byteLength(o.value) : 0) + 8;
  });
  allCompares(spec, (c) => {
    bytes += Buffer.byteLength(c.key) + 16;
  });
  return bytes;
}

function footprintOf(spec: TxnSpec): Footprint {
  const f: Footprint = { writes: new Set(), writePrefixes: [], touches: new Set(), touchPrefixes: [] };
  const touch = (key: string, prefix: boolean | undefined): void => {
    if (prefix === true) f.touchPrefixes.push(key);
    else f.touches.add(key);
  };
  leafOps([{ type: 'txn', txn: spec }], (o) => {
    const prefix = o.type !== 'put' && o.prefix === true;
    touch(o.key, prefix);
    if (o.type === 'get') return;
    if (prefix) f.writePrefixes.push(o.key);
    else f.writes.add(o.key);
  });
  allCompares(spec, (c) => {
    touch(c.key, c.prefix);
  });
  return f;
}

/** `key` is one of `keys` or lies under one of `prefixes`. */
function covered(key: string, keys: ReadonlySet<string>, prefixes: readonly string[]): boolean {
  return keys.has(key) || prefixes.some((p) => key.startsWith(p));
}

/** Some key of `a`'s writes is read, compared or written by `b` (exact keys and prefixes). */
function writesInto(a: Footprint, b: Footprint): boolean {
  for (const key of a.writes) if (covered(key, b.touches, b.touchPrefixes)) return true;
  for (const p of a.writePrefixes) {
    for (const key of b.touches) if (key.startsWith(p)) return true;
    if (b.touchPrefixes.some((q) => q.startsWith(p) || p.startsWith(q))) return true;
  }
  return false;
}

/** The accumulated footprint of a combined request being gathered. */
class Gathered {
  readonly #maxReplyBytes: number;
  readonly calls: Pending[] = [];
  readonly footprint: Footprint = { writes: new Set(), writePrefixes: [], touches: new Set(), touchPrefixes: [] };
  parts = 0;
  longest = 0;
  bytes = 0;
  replyBytes = 0;

  constructor(maxReplyBytes: number) {
    this.#maxReplyBytes = maxReplyBytes;
  }

  /** `p` can join: no conflict either way, and the request and its reply stay within the limits. */
  admits(p: Pending): boolean {
    if (this.calls.length === 0) return true;
    const parts = this.parts + p.parts.length;
    if (parts + Math.max(this.longest, p.longest) > MAX_TXN_OPS) return false;
    if (this.bytes + p.bytes > MAX_COMBINED_REQUEST_BYTES) return false;
    if (this.replyBytes + p.replyBytes > this.#maxReplyBytes) return false;
    return !writesInto(p.footprint, this.footprint) && !writesInto(this.footprint, p.footprint);
  }

  add(p: Pending): void {
    this.calls.push(p);
    this.parts += p.parts.length;
    this.longest = Math.max(this.longest, p.longest);
    this.bytes += p.bytes;
    this.replyBytes += p.replyBytes;
    const f = this.footprint;
    for (const k of p.footprint.writes) f.writes.add(k);
    for (const k of p.footprint.touches) f.touches.add(k);
    f.writePrefixes.push(...p.footprint.writePrefixes);
    f.touchPrefixes.push(...p.footprint.touchPrefixes);
  }
}

/**
 * The nested txns `spec` becomes in a combined request, or undefined when it is not combined (it
 * writes nothing, or reads a prefix).
 */
function partsOf(spec: TxnSpec): { parts: readonly TxnSpec[]; batch: boolean } | undefined {
  const ops = [...spec.success, ...(spec.failure ?? [])];
  if (!anyLeaf(ops, (o) => o.type !== 'get')) return undefined;
  // A prefix read's reply has no bound the txn could state.
  if (anyLeaf(ops, (o) => o.type === 'get' && o.prefix === true)) return undefined;
  const failure = spec.failure ?? [];
  const batch = spec.compare.length === 0 && failure.length === 0 && spec.success.length > 0;
  if (!batch || spec.success.some((o) => o.type !== 'txn')) return { parts: [spec], batch: false };
  return { parts: spec.success.map((o) => (o as Extract<Op, { readonly type: 'txn' }>).txn), batch: true };
}

/**
 * etcd refused the request before applying any of it: too many ops, a key written twice, too
 * large, a put to a lease that is gone, the NOSPACE alarm, no permission. (Not `unavailable`,
 * `other` or `response-too-large`: the request may have been applied.) One exception of etcd's,
 * N16: the request whose apply takes the store over the quota is applied and answered NOSPACE.
 * Sent again txn by txn, its txns meet the raised alarm (a txn that puts is refused again, as it
 * would be alone) or their own compares (a delete's mod-revision compare now fails): callers are
 * told "refused" or "raced" for what was done, as a flat txn's caller is told NOSPACE for it.
 */
function refusedUnapplied(err: unknown): boolean {
  return err instanceof EtcdError && UNAPPLIED.has(err.failure);
}

const UNAPPLIED: ReadonlySet<EtcdFailure> = new Set<EtcdFailure>([
  'too-many-ops',
  'duplicate-key',
  'request-too-large',
  'lease-not-found',
  'no-space',
  'permission-denied',
]);

/**
 * The ops `spec` needs under a parent, as etcd counts them: its longest list (compares, success,
 * failure) plus what its neediest nested txn needs, since etcd allows a nested txn only what its
 * parent's longest list leaves of `--max-txn-ops` (`checkTxnRequest`; the memory etcd's
 * `checkOpCounts`). A flat txn needs its longest list.
 */
export function opsNeeded(spec: TxnSpec): number {
  const failure = spec.failure ?? [];
  let nested = 0;
  for (const o of [...spec.success, ...failure]) if (o.type === 'txn') nested = Math.max(nested, opsNeeded(o.txn));
  return Math.max(spec.compare.length, spec.success.length, failure.length) + nested;
}

function longestList(parts: readonly TxnSpec[]): number {
  let longest = 0;
  for (const p of parts) longest = Math.max(longest, opsNeeded(p));
  return longest;
}

export class CombiningBackend extends ForwardingBackend {
  readonly #maxInFlight: number;
  readonly #maxReplyBytes: number;
  readonly #observe: ((txns: number) => void) | undefined;
  #queue: Pending[] = [];
  #inFlight = 0;
  #scheduled = false;

  constructor(inner: KvBackend, options: CombiningOptions) {
    super(inner);
    this.#maxInFlight = Math.max(1, Math.floor(options.maxInFlight));
    this.#maxReplyBytes = options.maxReplyBytes;
    this.#observe = options.observe;
  }

  override txn(spec: TxnSpec, options?: TxnOptions): Promise<TxnResult> {
    if (options?.urgent === true) return this.inner.txn(spec, options);
    const shape = partsOf(spec);
    if (shape === undefined) return this.inner.txn(spec);
    const bytes = requestBytesOf(spec);
    const replyBytes = options?.replyBytes ?? getsOf(spec) * GET_REPLY_BYTES;
    if (bytes > MAX_COMBINED_REQUEST_BYTES || replyBytes > this.#maxReplyBytes) return this.inner.txn(spec);
    return new Promise<TxnResult>((resolve, reject) => {
      this.#queue.push({
        spec,
        parts: shape.parts,
        batch: shape.batch,
        footprint: footprintOf(spec),
        bytes,
        replyBytes,
        longest: longestList(shape.parts),
        resolve,
        reject,
      });
      this.#schedule();
    });
  }

  /** Send at the end of this turn, unless every request slot is taken (a returning request sends). */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#maxInFlight) {
      // In queue order, every txn that fits with those taken before it; the others wait for the next request.
      const gathered = new Gathered(this.#maxReplyBytes);
      const rest: Pending[] = [];
      for (const p of this.#queue) {
        if (gathered.admits(p)) gathered.add(p);
        else rest.push(p);
      }
      this.#queue = rest;
      this.#inFlight += 1;
      this.#observe?.(gathered.calls.length);
      const calls = gathered.calls;
      void this.#send(calls)
        .catch((err: unknown) => {
          for (const c of calls) c.reject(err);
        })
        .finally(() => {
          this.#inFlight -= 1;
          if (this.#queue.length > 0) this.#schedule();
        });
    }
  }

  /** One request for `calls`, each settled with its own result (a throw here rejects the unsettled). */
  async #send(calls: readonly Pending[]): Promise<void> {
    const [only] = calls;
    if (calls.length === 1 && only !== undefined) {
      await this.inner.txn(only.spec).then(only.resolve, only.reject);
      return;
    }
    let res: TxnResult;
    try {
      res = await this.inner.txn({
        compare: [],
        success: calls.flatMap((c) => c.parts.map((txn): Op => ({ type: 'txn', txn }))),
      });
    } catch (err) {
      if (!refusedUnapplied(err)) {
        for (const c of calls) c.reject(err);
        return;
      }
      // etcd refused the request as a whole and applied none of it (a lease one txn puts to is
      // gone, the NOSPACE alarm refuses another's puts, ...): each txn alone gets its own answer.
      await Promise.all(calls.map((c) => this.inner.txn(c.spec).then(c.resolve, c.reject)));
      return;
    }
    const results: TxnResult[] = [];
    let at = 0;
    for (const c of calls) {
      const nested = res.responses
        .slice(at, at + c.parts.length)
        .map((r) => r.txn)
        .filter((n): n is NestedResult => n !== undefined);
      at += c.parts.length;
      const [one] = nested;
      if (one === undefined || nested.length !== c.parts.length) {
        const err = new EtcdError('other', 'a combined etcd txn returned fewer nested results than it sent');
        for (const d of calls) d.reject(err);
        return;
      }
      results.push(
        c.batch
          ? { succeeded: true, revision: res.revision, responses: nested.map((txn) => ({ kvs: [], txn })) }
          : { succeeded: one.succeeded, revision: res.revision, responses: one.responses },
      );
    }
    calls.forEach((c, i) => {
      const r = results[i];
      if (r !== undefined) c.resolve(r);
    });
  }
}
