/**
 * A thin layer over etcd3's raw KV client: compare / op builders with revisions as bigint, one
 * `txn` entry point (timed, errors translated, never retried) and idempotent reads (retried).
 */
import type { ICompare, IKeyValue, IRangeResponse, IRequestOp, IResponseOp, ITxnResponse, KVClient } from 'etcd3';
import { translateEtcdError, withRetry } from './errors.js';
import { prefixEnd } from './keys.js';

export interface KvObserver {
  /** Called after every transaction with its family name, duration and outcome. */
  onTxn?(name: string, seconds: number, outcome: 'succeeded' | 'failed' | 'error'): void;
}

export interface TxnSpec {
  readonly compare: readonly ICompare[];
  readonly success: readonly IRequestOp[];
  readonly failure?: readonly IRequestOp[];
}

export interface TxnResult {
  readonly succeeded: boolean;
  readonly revision: bigint;
  readonly responses: readonly IResponseOp[];
}

const buf = (key: string): Buffer => Buffer.from(key);

export const cmp = {
  /** Key does not exist. */
  absent: (key: string): ICompare => ({ key: buf(key), target: 'Create', result: 'Equal', create_revision: '0' }),
  /** Key exists. */
  present: (key: string): ICompare => ({ key: buf(key), target: 'Create', result: 'Greater', create_revision: '0' }),
  createdAt: (key: string, revision: bigint): ICompare => ({
    key: buf(key),
    target: 'Create',
    result: 'Equal',
    create_revision: revision.toString(),
  }),
  modifiedAt: (key: string, revision: bigint): ICompare => ({
    key: buf(key),
    target: 'Mod',
    result: 'Equal',
    mod_revision: revision.toString(),
  }),
  /** Every key under `prefix` was created before `revision` (true when there is none). */
  allCreatedBefore: (prefix: string, revision: bigint): ICompare => ({
    key: buf(prefix),
    range_end: prefixEnd(prefix),
    target: 'Create',
    result: 'Less',
    create_revision: revision.toString(),
  }),
  leaseIs: (key: string, leaseId: string): ICompare => ({
    key: buf(key),
    target: 'Lease',
    result: 'Equal',
    lease: leaseId,
  }),
};

export const op = {
  put: (key: string, value: string, leaseId?: string): IRequestOp => ({
    request_put: { key: buf(key), value: Buffer.from(value), ...(leaseId === undefined ? {} : { lease: leaseId }) },
  }),
  get: (key: string): IRequestOp => ({ request_range: { key: buf(key) } }),
  getPrefix: (prefix: string): IRequestOp => ({ request_range: { key: buf(prefix), range_end: prefixEnd(prefix) } }),
  del: (key: string): IRequestOp => ({ request_delete_range: { key: buf(key) } }),
  delPrefix: (prefix: string): IRequestOp => ({
    request_delete_range: { key: buf(prefix), range_end: prefixEnd(prefix) },
  }),
};

/** The kvs of the `index`-th response of a txn (a range op), or []. */
export function rangeKvs(result: TxnResult | ITxnResponse, index: number): IKeyValue[] {
  return result.responses[index]?.response_range.kvs ?? [];
}

export function firstKv(result: TxnResult | ITxnResponse, index: number): IKeyValue | undefined {
  return rangeKvs(result, index)[0];
}

export class Kv {
  readonly #client: KVClient;
  readonly #observer: KvObserver;

  constructor(client: KVClient, observer: KvObserver = {}) {
    this.#client = client;
    this.#observer = observer;
  }

  /** Run one transaction, once. A thrown error means the outcome is unknown. */
  async txn(name: string, spec: TxnSpec): Promise<TxnResult> {
    const started = performance.now();
    try {
      const res = await this.#client.txn({
        compare: [...spec.compare],
        success: [...spec.success],
        failure: [...(spec.failure ?? [])],
      });
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, res.succeeded ? 'succeeded' : 'failed');
      return { succeeded: res.succeeded, revision: BigInt(res.header.revision), responses: res.responses };
    } catch (err) {
      this.#observer.onTxn?.(name, (performance.now() - started) / 1000, 'error');
      throw translateEtcdError(err, `txn ${name}`);
    }
  }

  /** Several reads at one revision (a read-only txn: idempotent, so retried). */
  async read(name: string, ops: readonly IRequestOp[]): Promise<TxnResult> {
    return withRetry(`read ${name}`, async () => {
      const res = await this.#client.txn({ compare: [], success: [...ops], failure: [] });
      return { succeeded: true, revision: BigInt(res.header.revision), responses: res.responses };
    });
  }

  /** One page of a prefix range, optionally at a fixed revision, starting at `fromKey`. */
  async rangePage(
    prefix: string,
    options: { readonly fromKey?: string; readonly limit: number; readonly revision?: bigint },
  ): Promise<IRangeResponse> {
    return withRetry(`range ${prefix}`, () =>
      this.#client.range({
        key: buf(options.fromKey ?? prefix),
        range_end: prefixEnd(prefix),
        limit: options.limit,
        ...(options.revision === undefined ? {} : { revision: options.revision.toString() }),
      }),
    );
  }

  /** Every key under `prefix` at one revision, page by page. Returns the kvs and that revision. */
  async rangeAll(
    prefix: string,
    options: { readonly atRevision?: bigint; readonly pageSize?: number } = {},
  ): Promise<{ kvs: IKeyValue[]; revision: bigint }> {
    const kvs: IKeyValue[] = [];
    const pageSize = options.pageSize ?? 500;
    let revision: bigint | undefined = options.atRevision;
    let fromKey: string | undefined;
    for (;;) {
      const page = await this.rangePage(prefix, {
        limit: pageSize,
        ...(fromKey === undefined ? {} : { fromKey }),
        ...(revision === undefined ? {} : { revision }),
      });
      revision ??= BigInt(page.header.revision);
      kvs.push(...page.kvs);
      const last = page.kvs.at(-1);
      if (!page.more || last === undefined) return { kvs, revision };
      fromKey = `${last.key.toString()}\0`;
    }
  }
}
