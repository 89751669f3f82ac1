/**
 * The create-if-absent txn that a session key and a lock key share: both live on a lease of their
 * own, and exist once (the session per session id, the lock per name).
 */
import { cmp, op, type Kv } from '../kv.js';

/**
 * The body of the `acquireLock` and `createSession` txns (their headers, with keys, compares and
 * results, stand at those functions, and in model/leasehold.pml): put `key` = `value` on lease
 * `leaseId` if the key is absent. Resolves to the txn revision (the key's create and mod revision),
 * or undefined when the key existed (nothing written). Not a txn of its own: no header here.
 */
export async function createOnLease(
  kv: Kv,
  name: string,
  args: { readonly key: string; readonly value: string; readonly leaseId: string },
): Promise<bigint | undefined> {
  const res = await kv.txn(name, {
    compare: [cmp.absent(args.key)],
    success: [op.put(args.key, args.value, args.leaseId)],
  });
  return res.succeeded ? res.revision : undefined;
}
