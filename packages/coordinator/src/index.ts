/**
 * `createCoordinator(config, deps)`: the library entry of the leasehold coordinator.
 *
 * Starts, in order: the etcd client, the task index (range read + watch), the session keepalive
 * stream, the HTTP server with the worker WebSocket endpoint. `close()` is the graceful shutdown:
 * stop taking grants, close worker sockets with 1001 "going away" (workers move to a peer, which
 * adopts their sessions: nothing is revoked here), stop the watch and close etcd.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import type { Server as TlsServer } from 'node:tls';
import type { Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { CLOSE_GOING_AWAY } from './core/dispatch.js';
import type { Timers } from './core/timers.js';
import type { KvBackend } from './etcd/backend.js';
import { etcdBackendOf, leaseStoreOf } from './etcd/etcd-store.js';
import type { FenceTarget } from './fence/port.js';
import { SinkFenceTarget } from './fence/sink-fence-target.js';
import { HttpSinkObserver } from './fence/sink-observer.js';
import { ConsoleRevocations } from './http/console/console-revocations.js';
import type { TaskApi } from './http/routes-tasks.js';
import { createHttpServer } from './http/server.js';
import { Metrics } from './metrics.js';
import { Readiness } from './service/readiness.js';
import type { RetryPolicyOf } from './service/task-submit.js';
import { createServices } from './services.js';
import { readFileFromDisk, tlsMaterialOf, type ReadFile } from './tls-material.js';
import { realTimers } from './timers.js';
import type { WorkerSocket } from './ws/connection.js';
import { WorkerSockets, type AcceptOutcome } from './ws/server.js';
import { createWorkerAuthenticator, type PresentedCredentials } from './ws/worker-auth.js';

export { loadConfig, redactConfig, HELP_TEXT, ENV_PREFIX, OPTIONS } from './config.js';
export type { CoordinatorConfig } from './config.js';
export { CoordinatorError, EtcdError, EtcdRefusedError, EtcdUnavailableError, SinkUnavailableError } from './errors.js';
export type { EtcdFailure } from './errors.js';
/**
 * The etcd port (what the coordinator needs of etcd: everything `etcd/backend.ts` declares) and the
 * injected timers: for other backends and tests.
 */
export * from './etcd/backend.js';
export { requestBytesOf } from './etcd/combining-backend.js';
export type { TimerHandle, Timers } from './core/timers.js';
export { SinkFenceTarget } from './fence/sink-fence-target.js';
export type { FenceTarget, AdvanceItem, AdvanceItemResult, SinkProbe } from './fence/port.js';
export { KeyLayout } from './etcd/keys.js';
export { WORKER_PATH } from './ws/server.js';
/** A worker connection from a transport other than the WebSocket endpoint (`Coordinator.connectWorker`). */
export type { AcceptOutcome, AcceptedWorker } from './ws/server.js';
export type { WorkerSocket } from './ws/connection.js';
export type { PresentedCredentials } from './ws/worker-auth.js';
export type { ReadFile } from './tls-material.js';
export type { TaskView, ResourceView } from './service/tasks.js';
export { submittedRetryPolicy } from './service/task-submit.js';
export type { RetryPolicyOf } from './service/task-submit.js';
export type { SubmitInput } from './core/submit-plan.js';
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
  /** Wall clock (epoch ms) of the times stored in task records (backoffs, history); default `Date.now`. */
  readonly wallClock?: () => number;
  /** [0, 1) for backoff jitter; default `Math.random`. */
  readonly random?: () => number;
  /** The sink's fence; default: HTTP to `config.sink.url`. */
  readonly fenceTarget?: FenceTarget;
  /**
   * Wraps the HTTP fence target built from `config.sink` (to count, delay or log advances) and
   * returns the one every fence advance goes through; its `close` is called at close. Default:
   * none (the HTTP target itself). Ignored with `fenceTarget`. A dependency-injection seam.
   */
  readonly wrapFenceTarget?: (sink: FenceTarget) => FenceTarget;
  /**
   * The retry policy a submitted task is stored with, given its submit; default: the one it was
   * submitted with (unset parts take `config.retryPolicy`). A dependency-injection seam: an
   * embedding may clamp or replace what submitters ask for.
   */
  readonly retryPolicyOf?: RetryPolicyOf;
  /** etcd, as the coordinator's port; default: an etcd3 client to `config.etcd` (the in-memory etcd in tests). */
  readonly backend?: KvBackend;
  /**
   * Reads the certificate and key files the config names (TLS server, etcd, sink CA). main.ts
   * passes its reader (`readFileSync`); an embedding that passes none gets `readFileSync`.
   */
  readonly readFile?: ReadFile;
  /** Listen on `config.http.host:port` (default true). false: no socket; workers come through `connectWorker`. */
  readonly listen?: boolean;
  /** Also collect Node's default process metrics. */
  readonly defaultMetrics?: boolean;
}

export interface Coordinator {
  readonly coordinatorId: string;
  /** The bound address (port 0 when not listening). */
  readonly address: { readonly host: string; readonly port: number };
  /** `http(s)://host:port` (empty when not listening). */
  readonly url: string;
  readonly metrics: Metrics;
  /** The task API in process: what the admin routes (`/v1/tasks`, ...) call. */
  readonly tasks: TaskApi;
  /**
   * Serve a worker connection from a transport other than the WebSocket endpoint (an in-process
   * pair): the credential it presents is checked as at a WebSocket upgrade; the transport feeds
   * the frames it receives to the accepted worker and tells it when it closes.
   */
  connectWorker(socket: WorkerSocket, presented: PresentedCredentials): AcceptOutcome;
  /** Read the TLS certificate and key files again (SIGHUP): new connections use them, open ones stay. */
  reloadTls(): void;
  close(): Promise<void>;
}

const monotonic: Clock = { nowMs: () => performance.now() };

export async function createCoordinator(config: CoordinatorConfig, deps: CoordinatorDeps): Promise<Coordinator> {
  const coordinatorId = config.coordinatorId ?? `c-${randomUUID().slice(0, 8)}`;
  const log = deps.logger.child({ coordinatorId });
  const metrics = new Metrics({ defaultMetrics: deps.defaultMetrics ?? false });
  const material = tlsMaterialOf(config, deps.readFile ?? readFileFromDisk);
  const sinkTls = material.sinkCa === undefined ? {} : { tls: { ca: material.sinkCa } };
  const store = leaseStoreOf(deps.backend ?? etcdBackendOf(config.etcd, material.etcd, log), config.etcd, metrics);
  const wrap = deps.wrapFenceTarget ?? ((sink: FenceTarget) => sink);
  const fenceTarget =
    deps.fenceTarget ??
    wrap(
      new SinkFenceTarget({
        url: config.sink.url,
        key: config.sink.key,
        timeoutMs: config.sink.timeoutMs,
        vouchWith: config.capabilitySigningKey,
        ...sinkTls,
      }),
    );
  const services = createServices({
    config,
    coordinatorId,
    store,
    fenceTarget,
    sinkObserver: new HttpSinkObserver({ url: config.sink.url, key: config.sink.key, ...sinkTls }),
    clock: deps.clock ?? monotonic,
    timers: deps.timers ?? realTimers,
    ...(deps.wallClock === undefined ? {} : { wallClock: deps.wallClock }),
    ...(deps.random === undefined ? {} : { random: deps.random }),
    ...(deps.retryPolicyOf === undefined ? {} : { retryPolicyOf: deps.retryPolicyOf }),
    log,
    metrics,
  });
  const { sessions, grants, leases, tasks, feed, state } = services;
  const wallClock = deps.wallClock ?? Date.now;

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
    etcdReachable: () => !state.etcdUnreachable,
    fenceTarget,
    signingKey: config.capabilitySigningKey,
    metrics,
    nowMs: () => performance.now(),
  });
  // Console logouts, shared with every coordinator through etcd; read before the first request.
  const consoleRevocations = new ConsoleRevocations({
    store,
    wallClock,
    log: log.child({ component: 'console' }),
  });
  try {
    await consoleRevocations.start();
  } catch (err) {
    await services.close();
    store.close();
    throw err;
  }
  const serverTls = material.server;
  const app = createHttpServer({
    console: services.console,
    consoleRevocations,
    consoleLogin: config.consoleLogin,
    wallClock,
    ...(serverTls === undefined || tls === undefined
      ? {}
      : { https: { ...serverTls(), requestCert: tls.clientCaFile !== undefined, rejectUnauthorized: false } }),
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
    isShuttingDown: () => state.shuttingDown,
    connection: {
      sessions,
      grants,
      leases,
      carried: services.carried,
      clock: deps.clock ?? monotonic,
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

  const host = config.http.host;
  let port = 0;
  let url = '';
  if (deps.listen ?? true) {
    try {
      await app.listen({ host, port: config.http.port });
    } catch (err) {
      await consoleRevocations.close();
      await services.close();
      store.close();
      throw err;
    }
    port = (app.server.address() as AddressInfo).port;
    if (config.http.portFile !== undefined) writeFileSync(config.http.portFile, `${port}\n`);
    url = `${tls === undefined ? 'http' : 'https'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
    log.info({ url }, 'coordinator listening');
  } else {
    await app.ready();
  }

  let closing: Promise<void> | undefined;
  return {
    coordinatorId,
    address: { host, port },
    url,
    metrics,
    tasks,
    connectWorker: (socket, presented) => sockets.accept(socket, presented, 'in-process'),
    reloadTls: () => {
      if (serverTls === undefined) return;
      (app.server as unknown as TlsServer).setSecureContext(serverTls());
      log.info('tls certificates reloaded');
    },
    close: () =>
      (closing ??= (async () => {
        log.info('coordinator shutting down');
        const stopping = services.close();
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
