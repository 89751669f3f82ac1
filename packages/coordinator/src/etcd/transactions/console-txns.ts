/**
 * Transactions of the web console: a logout recorded for every coordinator. The key lives on a
 * lease of its own that ends when the cookie would have expired anyway, so the revocations kept
 * in etcd are only those of cookies that could still be presented.
 */
import { encodeRecord, type ConsoleRevokedRecord } from '../../core/records.js';
import type { RevokeConsoleOutcome } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { cmp, op, type Kv } from '../kv.js';

/**
 * revokeConsoleSession
 * keys:     console/revoked/<loginId>
 * compares: console/revoked/<loginId> absent (a second logout of the same login writes nothing)
 * success:  put console/revoked/<loginId> = {v, expiresAtMs}, on lease `leaseId` (TTL: until the
 *           cookie expires, rounded up)
 * failure:  nothing
 * result:   revoked{revision} (every coordinator's revocation watch delivers it), or already (the
 *           caller revokes the lease it granted for this txn)
 */
export async function revokeConsoleSession(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly loginId: string; readonly record: ConsoleRevokedRecord; readonly leaseId: string },
): Promise<RevokeConsoleOutcome> {
  const key = keys.consoleRevocation(args.loginId);
  const res = await kv.txn('revokeConsoleSession', {
    compare: [cmp.absent(key)],
    success: [op.put(key, encodeRecord(args.record), args.leaseId)],
  });
  return res.succeeded ? { kind: 'revoked', revision: res.revision } : { kind: 'already' };
}
