/**
 * `createSink(config, deps)`: the library entry. Opens the SQLite store (migrating it, refusing a
 * newer schema), starts the group-commit service and the HTTP app, and listens unless told not to.
 *
 * Shutdown (`close`): new requests get 503 SHUTTING_DOWN and `Connection: close`; requests already
 * inside the app finish (their batch commits); then the service drains and the database closes.
 */
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import type { SinkConfig } from './config.js';
import { buildHttpApp } from './http/app.js';
import { createMetrics, type SinkMetrics } from './metrics.js';
import { FencedService } from './service/fenced-service.js';
import { SCHEMA_VERSION } from './store/migrations.js';
import type { FenceStore } from './store/port.js';
import { SqliteFenceStore } from './store/sqlite-store.js';
import { ThreadedSqliteStore } from './store/threaded-sqlite-store.js';

export interface SinkDeps {
  /** Root (or parent) logger; the sink makes children. Default: silent. */
  readonly logger?: Logger;
  /** Wall clock for decision and result timestamps. Default Date.now. Forces the in-thread store. */
  readonly nowMs?: () => number;
  /** Listen on config.host:config.port. Default true; false for `app.inject` tests. */
  readonly listen?: boolean;
  /** Use this store instead of opening config.dbPath (e.g. another implementation of the port). */
  readonly store?: FenceStore;
  /** Collect process metrics in /metrics. Default true. */
  readonly processMetrics?: boolean;
}

export interface SinkAddress {
  readonly host: string;
  readonly port: number;
}

export interface Sink {
  readonly app: FastifyInstance;
  readonly store: FenceStore;
  readonly service: FencedService;
  readonly metrics: SinkMetrics;
  /** The bound address, or null when not listening. */
  readonly address: SinkAddress | null;
  /** Graceful stop; idempotent. */
  close(): Promise<void>;
}

export type SinkOptions = Pick<
  SinkConfig,
  | 'host'
  | 'port'
  | 'dbPath'
  | 'synchronous'
  | 'storeThread'
  | 'decisionRetention'
  | 'bodyLimitBytes'
  | 'maxBatchOps'
  | 'shutdownTimeoutMs'
  | 'coordinatorKeys'
  | 'readKeys'
  | 'capabilityKeys'
> &
  Partial<Pick<SinkConfig, 'testSabotage'>>;

async function openStore(config: SinkOptions, deps: SinkDeps): Promise<FenceStore> {
  const options = {
    path: config.dbPath,
    synchronous: config.synchronous,
    decisionRetention: config.decisionRetention,
    ...(config.testSabotage === 'skip-fence' ? { testSkipFence: true } : {}),
  };
  if (config.storeThread && deps.nowMs === undefined) return ThreadedSqliteStore.open(options);
  return new SqliteFenceStore({ ...options, ...(deps.nowMs === undefined ? {} : { nowMs: deps.nowMs }) });
}

export async function createSink(config: SinkOptions, deps: SinkDeps = {}): Promise<Sink> {
  const root = deps.logger ?? pino({ level: 'silent' });
  const log = root.child({ component: 'sink' });
  const store = deps.store ?? (await openStore(config, deps));
  if (deps.store === undefined) {
    const { dbPath, synchronous, storeThread } = config;
    log.info({ dbPath, schemaVersion: SCHEMA_VERSION, synchronous, storeThread }, 'store opened');
  }
  const metrics = createMetrics({ processMetrics: deps.processMetrics ?? true });
  const service = new FencedService({
    store,
    logger: root.child({ component: 'sink.service' }),
    metrics,
    maxBatchOps: config.maxBatchOps,
  });
  let closing = false;
  const app = buildHttpApp({
    service,
    metrics,
    logger: root.child({ component: 'sink.http' }),
    coordinatorKeys: config.coordinatorKeys,
    readKeys: config.readKeys,
    capabilityKeys: config.capabilityKeys,
    bodyLimitBytes: config.bodyLimitBytes,
    isClosing: () => closing,
  });
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (closing) void reply.header('connection', 'close');
    done(null, payload);
  });

  let address: SinkAddress | null = null;
  try {
    await app.ready();
    if (deps.listen ?? true) {
      await app.listen({ host: config.host, port: config.port });
      const bound = app.server.address();
      if (bound === null || typeof bound === 'string') throw new Error('server did not bind a TCP port');
      address = { host: config.host, port: bound.port };
    }
  } catch (err) {
    await app.close();
    await store.close();
    throw err;
  }

  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      closing = true;
      log.info({}, 'closing');
      const timer = setTimeout(() => {
        log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'shutdown timeout: closing connections');
        app.server.closeAllConnections();
      }, config.shutdownTimeoutMs);
      try {
        await app.close();
        await service.close();
      } finally {
        clearTimeout(timer);
        await store.close();
      }
      log.info({}, 'closed');
    })();
    return closed;
  };

  return { app, store, service, metrics, address, close };
}
