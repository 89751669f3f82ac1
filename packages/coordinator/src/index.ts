/**
 * `createCoordinator(config, deps)`: the library entry of the leasehold coordinator.
 *
 * Starts, in order: the etcd client, the task index (range read + watch), the session keepalive
 * stream, the HTTP server with the worker WebSocket endpoint. `close()` is the graceful shutdown:
 * stop taking grants, close worker sockets with 1001 "going away" (workers move to a peer, which
 * adopts their sessions: nothing is revoked here), stop the watch and close etcd.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { CLOSE_GOING_AWAY } from './core/dispatch.js';
import type { Timers } from './core/timers.js';
import { EtcdBackend } from './etcd/etcd-backend.js';
import { KeyLayout } from './etcd/keys.js';
import { KvLeaseStore } from './etcd/lease-store.js';
import { SinkFenceTarget, type FenceTarget } from './fence/fence-target.js';
import { ConsoleHub } from './http/console/console-hub.js';
import { ConsoleRevocations } from './http/console/console-revocations.js';
import { createHttpServer } from './http/server.js';
import { taskEventOf } from './service/events.js';
import { Metrics } from './metrics.js';
import { Readiness } from './service/readiness.js';
import { createServices } from './services.js';
import { realTimers } from './timers.js';
import { WorkerSockets } from './ws/server.js';
import { createWorkerAuthenticator } from './ws/worker-auth.js';

export { loadConfig, redactConfig, HELP_TEXT, ENV_PREFIX, OPTIONS } from './config.js';
export type { CoordinatorConfig } from './config.js';
export {
  CoordinatorError,
  EtcdError,
  EtcdRefusedError,
  EtcdUnavailableError,
  SinkUnavailableError,
} from './errors.js';
export type { EtcdFailure } from './errors.js';
/** The etcd port (what the coordinator needs of etcd) and the injected timers: for other backends and tests. */
export { inRange } from './etcd/backend.js';
export type {
  BackendStatus,
  Compare,
  CompareResult,
  CompareTarget,
  KeyRange,
  KeyValue,
  KvBackend,
  LeaseKeeper,
  LeaseKeeperOptions,
  Op,
  OpResult,
  RangeOptions,
  RangePage,
  TxnResult,
  TxnSpec,
  WatchEvent,
  WatchHandle,
  WatchListener,
} from './etcd/backend.js';
export type { TimerHandle, Timers } from './core/timers.js';
export { SinkFenceTarget } from './fence/fence-target.js';
export type { FenceTarget, AdvanceItem, AdvanceItemResult } from './fence/fence-target.js';
export { KeyLayout } from './etcd/keys.js';
export { WORKER_PATH } from './ws/server.js';
export type { TaskView, ResourceView } from './service/tasks.js';
/** The admin HTTP server alone (embedding, and the fuzzers' planted-bug self-test). */
export { createHttpServer } from './http/server.js';
export type { HttpOptions } from './http/server.js';
export type { TaskApi } from './http/routes-tasks.js';
export { Metrics } from './metrics.js';

export interface CoordinatorDeps {
  readonly logger: Logger;
  /** Monotonic clock for session deadlines; default `performance.now()`. */
  readonly clock?: Clock;
  /** Timers on that clock; default the real ones. */
  readonly timers?: Timers;
  /** The sink's fence; default: HTTP to `config.sink.url`. */
  readonly fenceTarget?: FenceTarget;
  /** Also collect Node's default process metrics. */
  readonly defaultMetrics?: boolean;
}

export interface Coordinator {
  readonly coordinatorId: string;
  readonly address: { readonly host: string; readonly port: number };
  /** `http://host:port` */
  readonly url: string;
  readonly metrics: Metrics;
  /** Read the TLS certificate and key files again (SIGHUP): new connections use them, open ones stay. */
  reloadTls(): void;
  close(): Promise<void>;
}

/** The server TLS material of `config`, read from its files now. */
function tlsMaterial(tls: NonNullable<CoordinatorConfig['http']['tls']>) {
  return {
    cert: readFileSync(tls.certFile),
    key: readFileSync(tls.keyFile),
    ...(tls.clientCaFile === undefined ? {} : { ca: readFileSync(tls.clientCaFile) }),
  };
}

const monotonic: Clock = { nowMs: () => performance.now() };

export async function createCoordinator(config: CoordinatorConfig, deps: CoordinatorDeps): Promise<Coordinator> {
  const coordinatorId = config.coordinatorId ?? `c-${randomUUID().slice(0, 8)}`;
  const log = deps.logger.child({ coordinatorId });
  const metrics = new Metrics({ defaultMetrics: deps.defaultMetrics ?? false });
  const etcdTls =
    config.etcd.caFile === undefined
      ? undefined
      : {
          ca: readFileSync(config.etcd.caFile),
          ...(config.etcd.certFile === undefined || config.etcd.keyFile === undefined
            ? {}
            : { cert: readFileSync(config.etcd.certFile), key: readFileSync(config.etcd.keyFile) }),
        };
  const backend = new EtcdBackend({
    endpoints: config.etcd.endpoints,
    requestTimeoutMs: config.etcd.requestTimeoutMs,
    maxResponseBytes: config.etcd.maxResponseBytes,
    log,
    ...(etcdTls === undefined ? {} : { tls: etcdTls }),
    ...(config.etcd.username === undefined || config.etcd.password === undefined
      ? {}
      : { auth: { username: config.etcd.username, password: config.etcd.password } }),
  });
  const store = new KvLeaseStore(backend, new KeyLayout(config.etcd.prefix), {
    observer: {
      onTxn: (txn, seconds, outcome) => {
        // Label values lower-case, like every leasehold metric: `submitTask` → `submit_task`.
        metrics.etcdTxn.observe({ txn: txn.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), outcome }, seconds);
      },
      onError: (failure) => {
        metrics.etcdErrors.inc({ failure: failure.replace(/-/g, '_') });
      },
    },
    budget: { pageBytes: config.etcd.pageBytes },
  });
  const fenceTarget =
    deps.fenceTarget ??
    new SinkFenceTarget({
      url: config.sink.url,
      key: config.sink.key,
      timeoutMs: config.sink.timeoutMs,
      ...(config.sink.caFile === undefined ? {} : { tls: { ca: readFileSync(config.sink.caFile) } }),
    });
  const services = createServices({
    config,
    coordinatorId,
    store,
    fenceTarget,
    clock: deps.clock ?? monotonic,
    timers: deps.timers ?? realTimers,
    log,
    metrics,
  });
  const { ctx, sessions, grants, leases, tasks, feed } = services;

  try {
    await services.start();
  } catch (err) {
    store.close();
    throw err;
  }

  const tls = config.http.tls;
  if (tls === undefined) {
    log.warn(
      { host: config.http.host },
      'PLAINTEXT: serving HTTP and WS without TLS; bearer keys and capabilities cross the network in clear',
    );
  }
  if (config.sharedWorkerKeys.length > 0) {
    log.warn(
      'INSECURE: shared worker keys are configured; any holder may claim any worker id and act for its sessions',
    );
  }
  const readiness = new Readiness({
    etcd: () => store.ping(),
    index: () => feed.ready,
    keepalive: () => sessions.keepaliveConnected,
    etcdReachable: () => !ctx.state.etcdUnreachable,
    fenceTarget,
    signingKey: config.capabilitySigningKey,
    metrics,
    nowMs: () => performance.now(),
  });
  const consoleHub = new ConsoleHub({
    coordinatorId,
    store,
    retryDefaults: config.retryPolicy,
    taskEventOf: (stored) => taskEventOf(stored, ctx, ctx.wallClock()),
    remainingMs: (sessionId) => {
      const local = sessions.get(sessionId);
      return local === undefined || !sessions.isLive(local) ? undefined : sessions.remainingMs(local);
    },
    sink: {
      url: config.sink.url,
      key: config.sink.key,
      ...(config.sink.caFile === undefined ? {} : { tls: { ca: readFileSync(config.sink.caFile) } }),
    },
    wallClock: ctx.wallClock,
    log: log.child({ component: 'console' }),
  });
  // Console logouts, shared with every coordinator through etcd; read before the first request.
  const consoleRevocations = new ConsoleRevocations({
    store,
    wallClock: ctx.wallClock,
    log: log.child({ component: 'console' }),
  });
  try {
    await consoleRevocations.start();
  } catch (err) {
    await services.close();
    store.close();
    throw err;
  }
  const app = createHttpServer({
    console: consoleHub,
    consoleRevocations,
    consoleLogin: config.consoleLogin,
    wallClock: ctx.wallClock,
    ...(tls === undefined
      ? {}
      : { https: { ...tlsMaterial(tls), requestCert: tls.clientCaFile !== undefined, rejectUnauthorized: false } }),
    adminKeys: config.adminKeys,
    maxJsonDepth: config.maxJsonDepth,
    maxPayloadBytes: config.http.maxPayloadBytes,
    tasks,
    events: services.events,
    metrics,
    log: log.child({ component: 'http' }),
    readiness: () => readiness.report(),
  });
  const sockets = new WorkerSockets(app.server, {
    authenticate: createWorkerAuthenticator({
      credentials: config.workerCredentials,
      sharedKeys: config.sharedWorkerKeys,
      clientCertificates: tls?.clientCaFile !== undefined,
    }),
    metrics,
    log: log.child({ component: 'ws' }),
    isShuttingDown: () => ctx.state.shuttingDown,
    connection: {
      sessions,
      grants,
      leases,
      clock: ctx.clock,
      metrics,
      log: log.child({ component: 'ws' }),
      coordinatorId,
      maxPayloadBytes: config.http.maxPayloadBytes,
      maxJsonDepth: config.maxJsonDepth,
      maxBadFrames: config.maxBadFrames,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      sessionTtlMs: config.sessionTtlMs,
    },
  });

  try {
    await app.listen({ host: config.http.host, port: config.http.port });
  } catch (err) {
    await consoleRevocations.close();
    await services.close();
    store.close();
    throw err;
  }
  const bound = app.server.address() as AddressInfo;
  if (config.http.portFile !== undefined) writeFileSync(config.http.portFile, `${bound.port}\n`);
  const host = config.http.host;
  const url = `${tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
  log.info({ url }, 'coordinator listening');

  let closing: Promise<void> | undefined;
  return {
    coordinatorId,
    address: { host, port: bound.port },
    url,
    metrics,
    reloadTls: () => {
      if (tls === undefined) return;
      (app.server as unknown as TlsServer).setSecureContext(tlsMaterial(tls));
      log.info('tls certificates reloaded');
    },
    close: () =>
      (closing ??= (async () => {
        log.info('coordinator shutting down');
        const stopping = services.close();
        await consoleHub.close();
        await consoleRevocations.close();
        await sockets.close(CLOSE_GOING_AWAY, 'coordinator going away');
        await app.close();
        await stopping;
        store.close();
        if (deps.fenceTarget === undefined) fenceTarget.close?.();
        log.info('coordinator stopped');
      })()),
  };
}
