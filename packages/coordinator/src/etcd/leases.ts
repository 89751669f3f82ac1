/**
 * etcd leases behind sessions: grant one (not retried: a retry could leak a second lease, which
 * would only expire on its own, but there is no need) and revoke one (idempotent: "not found"
 * means already gone, which is the goal).
 */
import type { Etcd3 } from 'etcd3';
import { isLeaseNotFound, translateEtcdError, withRetry } from './errors.js';

/** A fresh lease of `ttlSeconds`; returns its id (decimal string). */
export async function grantLease(client: Etcd3, ttlSeconds: number): Promise<string> {
  try {
    return (await client.leaseClient.leaseGrant({ TTL: ttlSeconds })).ID;
  } catch (err) {
    throw translateEtcdError(err, 'lease grant');
  }
}

/** Revoke `leaseId` (every key attached to it is deleted at one revision). Idempotent. */
export async function revokeLease(client: Etcd3, leaseId: string): Promise<void> {
  await withRetry('lease revoke', async () => {
    try {
      await client.leaseClient.leaseRevoke({ ID: leaseId });
    } catch (err) {
      if (!isLeaseNotFound(err)) throw err;
    }
  });
}
