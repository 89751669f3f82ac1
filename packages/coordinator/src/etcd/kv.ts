/**
 * A thin layer over a {@link KvBackend}: compare / op builders with revisions as bigint, one `txn`
 * entry point (timed, never retried), idempotent reads (retried by the one read policy) and
 * byte-bounded range pages ({@link Kv.rangePages}).
 */
import { CoordinatorError, EtcdError } from '../errors.js';
import type {
  Compare,
  KeyValue,
  KvBackend,
  NestedResult,
  Op,
  OpResult,
  RangePage,
  TxnOptions,
  TxnResult,
  TxnSpec,
} from './backend.js';
import { readPolicy, translateEtcdError } from './errors.js';

/** How large one read may be. */
export interface ReadBudget {
  /** Bytes one range page may carry (keys, values and overhead): its count is this / the family's largest value. */
  readonly pageBytes: number;
}

/** The default: 16 MiB pages, a quarter of the default receive limit of 64 MiB. */
export const DEFAULT_READ_BUDGET: ReadBudget = Object.freeze({ pageBytes: 16 * 1024 * 1024 });

/** A range page's count: as many values of at most `valueBytes` (plus key and overhead) as fit the budget. */
export function pageLimit(budget: ReadBudget, valueBytes: number): number {
  return Math.max(1, Math.floor(budget.pageBytes / (valueBytes + 512)));
}

export interface KvObserver {
  /** Called after every transaction with its family name, duration and outcome. */
  onTxn?(name: string, seconds: number, outcome: 'succeeded' | 'failed' | 'error'): void;
  /** Called for every failed call (txn, read, range page) with how it failed. */
  onError?(failure: EtcdError['failure']): void;
}

export type { TxnResult, TxnSpec } from './backend.js';

export const cmp = {
  /** Key does not exist. */
  absent: (key: string): Compare => ({ key, target: 'create', result: 'equal', value: 0n }),
  /** Key exists. */
  present: (key: string): Compare => ({ key, target: 'create', result: 'greater', value: 0n }),
  createdAt: (key: string, revision: bigint): Compare => ({ key, target: 'create', result: 'equal', value: revision }),
  /** Key's create_revision is not `revision` (absent, or created by another write). */
  notCreatedAt: (key: string, revision: bigint): Compare => ({
    key,
    target: 'create',
    result: 'not-equal',
    value: revision,
  }),
  modifiedAt: (key: string, revision: bigint): Compare => ({ key, target: 'mod', result: 'equal', value: revision }),
  /** Every key under `prefix` was created before `revision` (true when there is none). */
  allCreatedBefore: (prefix: string, revision: bigint): Compare => ({
    key: prefix,
    prefix: true,
    target: 'create',
    result: 'less',
    value: revision,
  }),
  leaseIs: (key: string, leaseId: string): Compare => ({ key, target: 'lease', result: 'equal', value: leaseId }),
};

export const op = {
  put: (key: string, value: string, leaseId?: string): Op => ({
    type: 'put',
    key,
    value,
    ...(leaseId === undefined ? {} : { lease: leaseId }),
  }),
  get: (key: string): Op => ({ type: 'get', key }),
  getPrefix: (prefix: string): Op => ({ type: 'get', key: prefix, prefix: true }),
  del: (key: string): Op => ({ type: 'delete', key }),
  delPrefix: (prefix: string): Op => ({ type: 'delete', key: prefix, prefix: true }),
  /** A nested txn (see {@link Op}): judged on the store as it was before the request. */
  txn: (spec: TxnSpec): Op => ({ type: 'txn', txn: spec }),
};

/** The outcome of the `index`-th op of a txn, a nested txn (throws if that op was not one). */
export function nestedResult(result: { readonly responses: readonly OpResult[] }, index: number): NestedResult {
  const nested = result.responses[index]?.txn;
  if (nested === undefined) throw new CoordinatorError('INTERNAL', `txn response ${index} is not a nested txn's`);
  return nested;
}

/** The kvs of the `index`-th response of a txn (a get op), or []. */
export function rangeKvs(result: { readonly responses: readonly OpResult[] }, index: number): readonly KeyValue[] {
  return result.responses[index]?.kvs ?? [];
}

export function firstKv(result: { readonly responses: readonly OpResult[] }, index: number): KeyValue | undefined {
  return rangeKvs(result, index)[0];
}

export class Kv {
  readonly backend: KvBackend;
  readonly budget: ReadBudget;
  readonly #observer: KvObserver;

  constructor(backend: KvBackend, observer: KvObserver = {}, budget: ReadBudget = DEFAULT_READ_BUDGET) {
    this.backend = backend;
    this.#observer = observer;
    this.budget = budget;
  }

  /** Run one transaction, once. A thrown error means the outcome is unknown. */
  async txn(name: string, spec: TxnSpec, options?: TxnOptions): Promise<TxnResult> {
    const started = performance.now();
    try {
      const res = await this.backend.txn(spec, options);
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, res.succeeded ? 'succeeded' : 'failed');
      return res;
    } catch (err) {
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, 'error');
      const cast = translateEtcdError(err, `txn ${name}`);
      this.#observer.onError?.(cast.failure);
      throw cast;
    }
  }

  /**
   * Several items in one request, each judged on its own: one item is a txn of its own (named
   * `names.one`); several are one txn without compares (`names.many`) whose success ops are one
   * nested txn per item, every nested compare judged on the store before the request, so an item is
   * applied exactly when a lone txn of it would have been at that point, and one whose compares fail
   * fails no other. `outcomeOf` reads each item's result (its branch's responses) with the txn's
   * revision. The caller keeps the items within etcd's op budget (a nested list at most 128 minus
   * the item count) and their written keys distinct (etcd refuses a key written twice in a request).
   * Once, like {@link txn}: a thrown error leaves every item's outcome unknown.
   */
  async txnEach<I, O>(
    names: { readonly one: string; readonly many: string },
    items: readonly I[],
    specOf: (item: I) => TxnSpec,
    outcomeOf: (item: I, result: NestedResult, revision: bigint) => O,
    options?: TxnOptions,
  ): Promise<O[]> {
    const [single] = items;
    if (single === undefined) throw new CoordinatorError('INTERNAL', `${names.many} needs at least one item`);
    if (items.length === 1) {
      const res = await this.txn(names.one, specOf(single), options);
      return [outcomeOf(single, res, res.revision)];
    }
    const res = await this.txn(
      names.many,
      { compare: [], success: items.map((item) => op.txn(specOf(item))) },
      options,
    );
    return items.map((item, i) => outcomeOf(item, nestedResult(res, i), res.revision));
  }

  /** Several reads at one revision (a read-only txn: idempotent, so retried). */
  async read(name: string, ops: readonly Op[]): Promise<TxnResult> {
    return this.#observed(readPolicy(`read ${name}`, () => this.backend.txn({ compare: [], success: ops })));
  }

  /** One page of a prefix range, optionally at a fixed revision, starting at `fromKey`. */
  async rangePage(
    prefix: string,
    options: { readonly fromKey?: string; readonly limit: number; readonly revision?: bigint },
  ): Promise<RangePage> {
    return this.#observed(readPolicy(`range ${prefix}`, () => this.backend.range(prefix, options)));
  }

  async #observed<T>(call: Promise<T>): Promise<T> {
    try {
      return await call;
    } catch (err) {
      if (err instanceof EtcdError) this.#observer.onError?.(err.failure);
      throw err;
    }
  }

  /**
   * Every key under `prefix` at one revision (the first page's, or `atRevision`), page by page in
   * key order, each page bounded in bytes: its count is {@link pageLimit} for values of at most
   * `valueBytes` (the family's bound). A page whose reply is still over the receive limit (values
   * larger than the bound: records of layout v1) is read again with half the count, down to one
   * key; the count grows back after a page that fits.
   */
  async *rangePages(
    prefix: string,
    options: { readonly valueBytes: number; readonly atRevision?: bigint; readonly fromKey?: string },
  ): AsyncGenerator<RangePage> {
    const nominal = pageLimit(this.budget, options.valueBytes);
    let limit = nominal;
    let revision: bigint | undefined = options.atRevision;
    let fromKey: string | undefined = options.fromKey;
    for (;;) {
      let page: RangePage;
      try {
        page = await this.rangePage(prefix, {
          limit,
          ...(fromKey === undefined ? {} : { fromKey }),
          ...(revision === undefined ? {} : { revision }),
        });
      } catch (err) {
        if (err instanceof EtcdError && err.failure === 'response-too-large' && limit > 1) {
          limit = Math.max(1, Math.floor(limit / 2));
          continue;
        }
        throw err;
      }
      revision ??= page.revision;
      yield { ...page, revision };
      const last = page.kvs.at(-1);
      if (!page.more || last === undefined) return;
      fromKey = `${last.key}\0`;
      limit = Math.min(nominal, limit * 2);
    }
  }

  /** Every key under `prefix` at one revision, in bounded pages (small families only: all in memory). */
  async rangeAll(
    prefix: string,
    options: { readonly valueBytes: number; readonly atRevision?: bigint },
  ): Promise<{ kvs: KeyValue[]; revision: bigint }> {
    const kvs: KeyValue[] = [];
    let revision = options.atRevision;
    for await (const page of this.rangePages(prefix, options)) {
      revision = page.revision;
      kvs.push(...page.kvs);
    }
    if (revision === undefined) throw new EtcdError('other', `range ${prefix} returned no page`);
    return { kvs, revision };
  }
}
