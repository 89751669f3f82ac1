/**
 * A thin layer over a {@link KvBackend}: compare / op builders with revisions as bigint, one `txn`
 * entry point (timed, never retried) and idempotent reads (retried by the one read policy).
 */
import type { Compare, KeyValue, KvBackend, Op, RangePage, TxnResult, TxnSpec } from './backend.js';
import { readPolicy, translateEtcdError } from './errors.js';

export interface KvObserver {
  /** Called after every transaction with its family name, duration and outcome. */
  onTxn?(name: string, seconds: number, outcome: 'succeeded' | 'failed' | 'error'): void;
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
};

/** The kvs of the `index`-th response of a txn (a get op), or []. */
export function rangeKvs(result: TxnResult, index: number): readonly KeyValue[] {
  return result.responses[index]?.kvs ?? [];
}

export function firstKv(result: TxnResult, index: number): KeyValue | undefined {
  return rangeKvs(result, index)[0];
}

export class Kv {
  readonly backend: KvBackend;
  readonly #observer: KvObserver;

  constructor(backend: KvBackend, observer: KvObserver = {}) {
    this.backend = backend;
    this.#observer = observer;
  }

  /** Run one transaction, once. A thrown error means the outcome is unknown. */
  async txn(name: string, spec: TxnSpec): Promise<TxnResult> {
    const started = performance.now();
    try {
      const res = await this.backend.txn(spec);
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, res.succeeded ? 'succeeded' : 'failed');
      return res;
    } catch (err) {
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, 'error');
      throw translateEtcdError(err, `txn ${name}`);
    }
  }

  /** Several reads at one revision (a read-only txn: idempotent, so retried). */
  async read(name: string, ops: readonly Op[]): Promise<TxnResult> {
    return readPolicy(`read ${name}`, () => this.backend.txn({ compare: [], success: ops }));
  }

  /** One page of a prefix range, optionally at a fixed revision, starting at `fromKey`. */
  async rangePage(
    prefix: string,
    options: { readonly fromKey?: string; readonly limit: number; readonly revision?: bigint },
  ): Promise<RangePage> {
    return readPolicy(`range ${prefix}`, () => this.backend.range(prefix, options));
  }

  /** Every key under `prefix` at one revision, page by page. Returns the kvs and that revision. */
  async rangeAll(
    prefix: string,
    options: { readonly atRevision?: bigint; readonly pageSize?: number } = {},
  ): Promise<{ kvs: KeyValue[]; revision: bigint }> {
    const kvs: KeyValue[] = [];
    const pageSize = options.pageSize ?? 500;
    let revision: bigint | undefined = options.atRevision;
    let fromKey: string | undefined;
    for (;;) {
      const page = await this.rangePage(prefix, {
        limit: pageSize,
        ...(fromKey === undefined ? {} : { fromKey }),
        ...(revision === undefined ? {} : { revision }),
      });
      revision ??= page.revision;
      kvs.push(...page.kvs);
      const last = page.kvs.at(-1);
      if (!page.more || last === undefined) return { kvs, revision };
      fromKey = `${last.key}\0`;
    }
  }
}
