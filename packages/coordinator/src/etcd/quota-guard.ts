/**
 * Keeps etcd's NOSPACE alarm in force for requests whose puts are all inside nested txns.
 *
 * etcd 3.4 charges a txn against its quota by the puts of its top-level success and failure lists
 * only (the larger of the two; `costTxn` in etcdserver/quota.go): a put inside a nested txn costs
 * nothing. With the alarm raised, etcd refuses a txn of cost > 0 (`applierV3Capped`) and lets a
 * txn of cost 0 through — meant for deletes and reads. So a request built of nested txns — a
 * `Kv.txnEach` batch of several items, a `CombiningBackend` request — would store its puts with
 * the alarm raised: submits stored while they should answer STORAGE_FULL, grants made while they
 * should be refused (G56), and the store growing past its quota until etcd refuses every txn,
 * deletes included.
 *
 * {@link QuotaGuardBackend} gives such a request a failure list holding one put of the layout's
 * guard key (`KeyLayout.quotaGuard`, never written): the request has no compares, so its success
 * list always runs and the failure list never does, but etcd counts the put, so the request costs
 * what a flat txn costs and is refused with the alarm raised (NOSPACE, which the combiner and the
 * callers already handle as refused before applying). Requests with top-level puts, with compares,
 * or without puts pass unchanged. The put is a few dozen bytes: within every request limit the
 * combiner keeps (its margin to etcd's 1.5 MiB is 0.3 MB), and it adds no op to a list longer than
 * one.
 *
 * What it does not do (N16): etcd charges the guard, not the nested puts, when the request arrives
 * (`size + cost < quota`), so a request of nested puts arriving just under the quota can take the
 * store past it by its own puts (at most the combiner's 1.2 MB per request in flight); from there
 * etcd refuses every txn, deletes included, until compaction and defragmentation. Charging the
 * nested bytes would mean sending them twice. And, for every txn, flat ones too: etcd applies a txn
 * that its apply takes over the quota and still answers NOSPACE (`quotaApplierV3`).
 */
import type { KvBackend, Op, TxnOptions, TxnResult, TxnSpec } from './backend.js';
import { ForwardingBackend } from './forwarding-backend.js';

/** True when `ops` put anything, at any depth, in either branch. */
function puts(ops: readonly Op[]): boolean {
  return ops.some((o) => o.type === 'put' || (o.type === 'txn' && (puts(o.txn.success) || puts(o.txn.failure ?? []))));
}

/**
 * True when etcd would charge `spec` nothing although it puts: no top-level put, a nested one, and
 * no compares and no failure list (so a guard put in the failure list can never run).
 */
export function needsQuotaGuard(spec: TxnSpec): boolean {
  if (spec.compare.length > 0 || (spec.failure ?? []).length > 0) return false;
  if (spec.success.some((o) => o.type === 'put')) return false;
  return puts(spec.success); // with no top-level put, any put is a nested one
}

/** `spec` as etcd should be sent it: with the guard put in its failure list when it needs one. */
export function quotaGuarded(spec: TxnSpec, guardKey: string): TxnSpec {
  return needsQuotaGuard(spec) ? { ...spec, failure: [{ type: 'put', key: guardKey, value: '' }] } : spec;
}

/** `inner` with every txn sent as {@link quotaGuarded} makes it; everything else passed through. */
export class QuotaGuardBackend extends ForwardingBackend {
  readonly #guardKey: string;

  constructor(inner: KvBackend, guardKey: string) {
    super(inner);
    this.#guardKey = guardKey;
  }

  override txn(spec: TxnSpec, options?: TxnOptions): Promise<TxnResult> {
    return this.inner.txn(quotaGuarded(spec, this.#guardKey), options);
  }
}
