/**
 * Console logouts in etcd (`console/revoked/<loginId>`, each on a lease that ends when its cookie
 * would have expired): recorded by the txn `revokeConsoleSession`, read all at once, watched.
 */
import { ConsoleRevokedRecordSchema, decodeRecord } from '../core/records.js';
import type { ConsoleRevocation, ConsoleRevocationListener, RevokeConsoleOutcome } from '../store/port.js';
import type { KeyValue, KvBackend } from './backend.js';
import type { KeyLayout } from './keys.js';
import type { Kv } from './kv.js';
import { MAX_SMALL_RECORD_BYTES } from './reads.js';
import { revokeConsoleSession } from './transactions/console-txns.js';

export class ConsoleRevocationStore {
  readonly #backend: KvBackend;
  readonly #kv: Kv;
  readonly #keys: KeyLayout;

  constructor(backend: KvBackend, kv: Kv, keys: KeyLayout) {
    this.#backend = backend;
    this.#kv = kv;
    this.#keys = keys;
  }

  /**
   * A lease of `ttlSeconds` for the key, then the txn. A thrown txn leaves the lease to its TTL (the
   * put may have landed); a second logout of the same login gives its fresh lease back at once.
   */
  async revoke(revocation: ConsoleRevocation, ttlSeconds: number): Promise<RevokeConsoleOutcome> {
    const leaseId = await this.#backend.grantLease(ttlSeconds);
    const outcome = await revokeConsoleSession(this.#kv, this.#keys, {
      loginId: revocation.loginId,
      record: { v: 1, expiresAtMs: revocation.expiresAtMs },
      leaseId,
    });
    if (outcome.kind === 'already') await this.#backend.revokeLease(leaseId).catch(() => undefined);
    return outcome;
  }

  async all(): Promise<{ revocations: ConsoleRevocation[]; revision: bigint }> {
    const { kvs, revision } = await this.#kv.rangeAll(this.#keys.consoleRevoked, {
      valueBytes: MAX_SMALL_RECORD_BYTES,
    });
    return { revocations: kvs.map((kv) => this.#revocationOf(kv)).filter((r) => r !== undefined), revision };
  }

  /** Watches `console/revoked/` alone; deletes (a lease ending with its cookie) are not reported. */
  watch(fromRevision: bigint, listener: ConsoleRevocationListener): Promise<{ cancel(): Promise<void> }> {
    const prefix = this.#keys.consoleRevoked;
    return this.#backend.watch({ start: prefix, endPrefix: prefix }, fromRevision, {
      onEvents: (events) => {
        const revoked = events
          .filter((ev) => ev.type === 'put')
          .map((ev) => this.#revocationOf(ev.kv))
          .filter((r) => r !== undefined);
        if (revoked.length > 0) listener.onRevoked(revoked);
      },
      onError: (err) => {
        listener.onError(err);
      },
    });
  }

  #revocationOf(kv: KeyValue): ConsoleRevocation | undefined {
    const record = decodeRecord(ConsoleRevokedRecordSchema, kv.value);
    const loginId = kv.key.slice(this.#keys.consoleRevoked.length);
    return record === undefined || loginId === '' ? undefined : { loginId, expiresAtMs: record.expiresAtMs };
  }
}
