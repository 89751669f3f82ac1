/**
 * A short lock in etcd: the retention sweeper's (one coordinator sweeps at a time) and the layout
 * converter's (one coordinator converts records of layout v1 at a time). The lock key lives on a
 * lease of its own: released by revoking it, and gone by itself if its holder dies. Nothing
 * depends on it for safety — every delete of a sweep and every conversion compares the record it
 * read — it only keeps several coordinators from doing the same work.
 */
import type { LockName, StoreLock } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { createOnLease } from './create-on-lease.js';
import type { Kv } from '../kv.js';

/**
 * acquireLock — take the lock `locks/<name>` for the holder.
 * keys:     locks/<name>
 * compares: locks/<name> absent
 * success:  put locks/<name> = {v, holder} on lease <leaseId> (TTL: the sweep's longest run)
 * failure:  nothing
 * result:   the lock {leaseId, revision}, or undefined (another holds it: the caller revokes its lease)
 */
export async function acquireLock(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly name: LockName; readonly holder: string; readonly leaseId: string },
): Promise<StoreLock | undefined> {
  const revision = await createOnLease(kv, 'acquireLock', {
    key: keys.lock(args.name),
    value: JSON.stringify({ v: 1, holder: args.holder }),
    leaseId: args.leaseId,
  });
  return revision === undefined ? undefined : { leaseId: args.leaseId, revision };
}
