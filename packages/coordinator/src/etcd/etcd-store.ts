/**
 * The coordinator's store on a real etcd: an {@link EtcdBackend} (etcd3, TLS, auth, timeouts,
 * receive limit) under a {@link KvLeaseStore} whose every txn and failure is counted in the
 * metrics. A test or an embedding passes its own `KvBackend` (the in-memory etcd) instead.
 */
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { KvBackend } from './backend.js';
import { CombiningBackend } from './combining-backend.js';
import { EtcdBackend } from './etcd-backend.js';
import { KeyLayout } from './keys.js';
import { KvLeaseStore } from './lease-store.js';
import { QuotaGuardBackend } from './quota-guard.js';

export function etcdBackendOf(
  etcd: CoordinatorConfig['etcd'],
  tls: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer } | undefined,
  log: Logger,
): EtcdBackend {
  return new EtcdBackend({
    endpoints: etcd.endpoints,
    requestTimeoutMs: etcd.requestTimeoutMs,
    maxResponseBytes: etcd.maxResponseBytes,
    log,
    ...(tls === undefined ? {} : { tls }),
    ...(etcd.username === undefined || etcd.password === undefined
      ? {}
      : { auth: { username: etcd.username, password: etcd.password } }),
  });
}

/**
 * The daemon's etcd request path on `backend`: every txn whose puts are all nested carries the
 * quota guard (quota-guard.ts: etcd's NOSPACE alarm counts only top-level puts), and write txns
 * ready at once share requests (`combinedRequests` of them in flight, their replies within half
 * the receive limit; none when `combinedRequests` is 0). The guard sits under the combiner, so a
 * combined request is guarded as a whole.
 */
export function requestPathOf(
  backend: KvBackend,
  etcd: Pick<CoordinatorConfig['etcd'], 'prefix' | 'combinedRequests' | 'maxResponseBytes'>,
  metrics?: Pick<Metrics, 'batchItems'>,
): KvBackend {
  const guarded = new QuotaGuardBackend(backend, new KeyLayout(etcd.prefix).quotaGuard);
  if (etcd.combinedRequests === 0) return guarded;
  return new CombiningBackend(guarded, {
    maxInFlight: etcd.combinedRequests,
    maxReplyBytes: Math.floor(etcd.maxResponseBytes / 2),
    observe: (txns) => {
      metrics?.batchItems.observe({ kind: 'etcd_request' }, txns);
    },
  });
}

/** The lease store on `backend` ({@link requestPathOf}), its txns timed and its failures counted. */
export function leaseStoreOf(
  backend: KvBackend,
  etcd: Pick<CoordinatorConfig['etcd'], 'prefix' | 'pageBytes' | 'combinedRequests' | 'maxResponseBytes'>,
  metrics: Pick<Metrics, 'etcdTxn' | 'etcdErrors' | 'batchItems'>,
): KvLeaseStore {
  return new KvLeaseStore(requestPathOf(backend, etcd, metrics), new KeyLayout(etcd.prefix), {
    observer: {
      onTxn: (txn, seconds, outcome) => {
        // Label values lower-case, like every leasehold metric: `submitTask` → `submit_task`.
        metrics.etcdTxn.observe({ txn: txn.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), outcome }, seconds);
      },
      onError: (failure) => {
        metrics.etcdErrors.inc({ failure: failure.replace(/-/g, '_') });
      },
    },
    budget: { pageBytes: etcd.pageBytes },
  });
}
