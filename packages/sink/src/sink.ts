/**
 * `createSink(config, deps)`: the library entry. Opens the store — SQLite, or PostgreSQL with
 * `store: 'postgres'` — (migrating it, refusing a newer schema), starts the group-commit service and the HTTP app, and listens unless told not to.
 *
 * Shutdown (`close`): new requests get 503 SHUTTING_DOWN and `Connection: close`; requests already
 * inside the app finish (their batch commits); then the service drains and the database closes.
 */
import type { Server as TlsServer } from 'node:tls';
import type { TlsMaterial } from '@leasehold/daemon-kit';
import type { FastifyInstance } from 'fastify';
import pino, { type Logger } from 'pino';
import { redactDatabaseUrl, type SinkConfig } from './config.js';
import type { BatchRules } from './core/batch.js';
import { buildHttpApp } from './http/app.js';
import { createMetrics, type SinkMetrics } from './metrics.js';
import { DecisionFeed } from './events/decision-feed.js';
import { EventStreams } from './events/event-streams.js';
import { RefusalFeed } from './events/refusal-feed.js';
import { FencedService } from './service/fenced-service.js';
import { SCHEMA_VERSION } from './store/migrations.js';
import type { FenceStore } from './store/port.js';
import { PostgresFenceStore } from './store/postgres-store.js';
import type { PostgresConnection } from './store/postgres-tls.js';
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
  /** The certificate and key of `config.tls`, read by the caller (main.ts); required with `config.tls`. */
  readonly tls?: TlsMaterial;
  /**
   * The PostgreSQL connection with the TLS files its URL names already read (`connectionTls`,
   * main.ts). Without it, a URL that names TLS files is refused (the sink reads no files itself).
   */
  readonly database?: PostgresConnection;
  /**
   * The rule the opened store judges writes by (core/batch.ts). Default `FENCED`, the design
   * note's rule and the only one production uses; a dependency-injection seam for embeddings and
   * test entry points. Given, it forces the in-thread SQLite store (a function does not cross to
   * the store's thread). Ignored with `store`.
   */
  readonly rules?: BatchRules;
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
  /** The open `GET /v1/events` streams. */
  readonly events: EventStreams;
  /** The bound address, or null when not listening. */
  readonly address: SinkAddress | null;
  /** New TLS material (SIGHUP: main.ts read the files again): new connections use it, open ones stay. */
  reloadTls(material: TlsMaterial): void;
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
  | 'capabilityPublicKeys'
> &
  Partial<
    Pick<
      SinkConfig,
      | 'store'
      | 'databaseUrl'
      | 'databasePoolSize'
      | 'tls'
      | 'maxJsonDepth'
      | 'capabilityCacheEntries'
      | 'eventsKeepaliveMs'
      | 'eventsMaxClients'
      | 'eventsMaxBufferedBytes'
      | 'eventsRefusalsPerSecond'
      | 'readPageMaxBytes'
    >
  >;

/** With a shared PostgreSQL database, other sinks commit too: the event feed also re-reads this often. */
const POSTGRES_FEED_POLL_MS = 1_000;

async function openPostgres(
  config: SinkOptions,
  deps: SinkDeps,
  log: Logger,
  metrics: SinkMetrics,
): Promise<PostgresFenceStore> {
  if (config.databaseUrl === undefined) throw new Error('store postgres needs a database URL');
  const store = await PostgresFenceStore.open({
    url: config.databaseUrl,
    ...(deps.database === undefined ? {} : { connection: deps.database }),
    poolSize: config.databasePoolSize ?? 4,
    decisionRetention: config.decisionRetention,
    ...(deps.nowMs === undefined ? {} : { nowMs: deps.nowMs }),
    ...(deps.rules === undefined ? {} : { rules: deps.rules }),
    onRetry: ({ code, attempt }) => {
      metrics.storeRetries.inc({ code });
      log.debug({ code, attempt }, 'batch retried');
    },
    onHealth: ({ healthy, error }) => {
      if (healthy) log.info({}, 'postgres reachable');
      else log.warn({ err: error }, 'postgres unreachable');
    },
  });
  const settings = await store.settings();
  log.info({ store: 'postgres', database: redactDatabaseUrl(config.databaseUrl), ...settings }, 'store opened');
  if (settings.fsync !== 'on')
    log.warn({ fsync: settings.fsync }, 'postgres runs with fsync off: acked writes may be lost');
  return store;
}

async function openStore(config: SinkOptions, deps: SinkDeps, log: Logger, metrics: SinkMetrics): Promise<FenceStore> {
  if (config.store === 'postgres') return openPostgres(config, deps, log, metrics);
  const options = {
    path: config.dbPath,
    synchronous: config.synchronous,
    decisionRetention: config.decisionRetention,
  };
  if (config.storeThread && deps.nowMs === undefined && deps.rules === undefined)
    return ThreadedSqliteStore.open(options);
  return new SqliteFenceStore({
    ...options,
    ...(deps.nowMs === undefined ? {} : { nowMs: deps.nowMs }),
    ...(deps.rules === undefined ? {} : { rules: deps.rules }),
  });
}

export async function createSink(config: SinkOptions, deps: SinkDeps = {}): Promise<Sink> {
  const root = deps.logger ?? pino({ level: 'silent' });
  const log = root.child({ component: 'sink' });
  const metrics = createMetrics({ processMetrics: deps.processMetrics ?? true });
  const store = deps.store ?? (await openStore(config, deps, log, metrics));
  if (deps.store === undefined && config.store !== 'postgres') {
    const { dbPath, synchronous, storeThread } = config;
    log.info({ store: 'sqlite', dbPath, schemaVersion: SCHEMA_VERSION, synchronous, storeThread }, 'store opened');
  }
  const service = new FencedService({
    store,
    logger: root.child({ component: 'sink.service' }),
    metrics,
    maxBatchOps: config.maxBatchOps,
    readPageMaxBytes: config.readPageMaxBytes,
  });
  const feed = new DecisionFeed({
    source: service,
    logger: root.child({ component: 'sink.events' }),
    pollIntervalMs: config.store === 'postgres' ? POSTGRES_FEED_POLL_MS : 0,
  });
  service.onCommit(() => {
    feed.notify();
  });
  const refusals = new RefusalFeed({
    perSecond: config.eventsRefusalsPerSecond ?? 100,
    ...(deps.nowMs === undefined ? {} : { nowMs: deps.nowMs }),
  });
  const events = new EventStreams({
    decisions: feed,
    refusals,
    logger: root.child({ component: 'sink.events' }),
    metrics,
    keepaliveMs: config.eventsKeepaliveMs ?? 15_000,
    maxClients: config.eventsMaxClients ?? 64,
    maxBufferedBytes: config.eventsMaxBufferedBytes ?? 1024 * 1024,
  });
  let closing = false;
  if (config.tls !== undefined && deps.tls === undefined) {
    await store.close();
    throw new Error('config.tls is set but its certificate and key were not passed (deps.tls; main.ts reads them)');
  }
  const https = config.tls === undefined ? undefined : deps.tls;
  if (https === undefined && (deps.listen ?? true)) {
    log.warn(
      { host: config.host },
      'PLAINTEXT: serving HTTP without TLS; keys and capabilities cross the network in clear',
    );
  }
  const app = buildHttpApp({
    ...(https === undefined ? {} : { https: { cert: https.cert, key: https.key } }),
    maxJsonDepth: config.maxJsonDepth ?? 64,
    service,
    metrics,
    logger: root.child({ component: 'sink.http' }),
    coordinatorKeys: config.coordinatorKeys,
    readKeys: config.readKeys,
    capabilityPublicKeys: config.capabilityPublicKeys,
    ...(config.capabilityCacheEntries === undefined ? {} : { capabilityCacheEntries: config.capabilityCacheEntries }),
    bodyLimitBytes: config.bodyLimitBytes,
    isClosing: () => closing,
    events: { streams: events, refusals },
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
        // Event streams never finish on their own: end them first so the server can close.
        events.close();
        feed.close();
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

  const reloadTls = (material: TlsMaterial): void => {
    if (https === undefined) return;
    (app.server as unknown as TlsServer).setSecureContext({ cert: material.cert, key: material.key });
    log.info({}, 'tls certificates reloaded');
  };

  return { app, store, service, metrics, events, address, reloadTls, close };
}
