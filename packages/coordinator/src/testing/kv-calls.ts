/** Test helper: the names of the txns and reads a store's {@link Kv} sends, as it sends them. */
import type { Kv } from '../etcd/kv.js';

/**
 * From now on, `kv`'s txns and reads are recorded by name (in `txns` and `reads`) and then sent
 * unchanged, options included.
 */
export function recordKvCalls(kv: Kv): { readonly txns: string[]; readonly reads: string[] } {
  const calls = { txns: [] as string[], reads: [] as string[] };
  const txn = kv.txn.bind(kv);
  const read = kv.read.bind(kv);
  kv.txn = (name, spec, options) => {
    calls.txns.push(name);
    return txn(name, spec, options);
  };
  kv.read = (name, ops) => {
    calls.reads.push(name);
    return read(name, ops);
  };
  return calls;
}
