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
import type { Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { CLOSE_GOING_AWAY } from './core/dispatch.js';
import { LeaseholdError, SinkUnavailableError } from './errors.js';
import { TaskIndex } from './core/task-index.js';
import { createEtcdClient } from './etcd/client.js';
import { KeyLayout } from './etcd/keys.js';
import { Kv } from './etcd/kv.js';
import { EtcdReads } from './etcd/reads.js';
import { WatchFeed } from './etcd/watch-feed.js';
import { createHttpServer } from './http/server.js';
import { Metrics } from './metrics.js';
import { MicroBatcher } from './service/batcher.js';
import type { ServiceContext } from './service/context.js';
import { GrantService } from './service/grants.js';
import { LeaseService } from './service/leases.js';
import { createGroupHandler } from './service/reactions.js';
import { SessionManager } from './service/sessions.js';
import { TaskService } from './service/tasks.js';
import { SinkFenceTarget, type FenceTarget } from './sink/fence-target.js';
import { WorkerSockets } from './ws/server.js';

export { loadConfig, redactConfig, HELP_TEXT, ENV_PREFIX, OPTIONS } from './config.js';
export type { CoordinatorConfig } from './config.js';
export { CoordinatorError, EtcdUnavailableError, SinkUnavailableError } from './errors.js';
export { SinkFenceTarget } from './sink/fence-target.js';
export type { FenceTarget, AdvanceItem, AdvanceItemResult } from './sink/fence-target.js';
export { KeyLayout } from './etcd/keys.js';
export { WORKER_PATH } from './ws/server.js';
export type { TaskView, ResourceView } from './service/tasks.js';

export interface CoordinatorDeps {
  readonly logger: Logger;
  /** Monotonic clock for session deadlines; default `performance.now()`. */
  readonly clock?: Clock;
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
  close(): Promise<void>;
}

const monotonic: Clock = { nowMs: () => performance.now() };

export async function createCoordinator(config: CoordinatorConfig, deps: CoordinatorDeps): Promise<Coordinator> {
  const coordinatorId = config.coordinatorId ?? `c-${randomUUID().slice(0, 8)}`;
  const log = deps.logger.child({ component: 'coordinator', coordinatorId });
  const metrics = new Metrics({ defaultMetrics: deps.defaultMetrics ?? false });
  const etcd = createEtcdClient(config.etcd);
  const kv = new Kv(etcd.kv, {
    onTxn: (txn, seconds, outcome) => {
      metrics.etcdTxn.observe({ txn, outcome }, seconds);
    },
  });
  const keys = new KeyLayout(config.etcd.prefix);
  const reads = new EtcdReads(kv, keys);
  const fenceTarget =
    deps.fenceTarget ??
    new SinkFenceTarget({ url: config.sink.url, key: config.sink.key, timeoutMs: config.sink.timeoutMs });
  const ctx: ServiceContext = {
    config,
    coordinatorId,
    clock: deps.clock ?? monotonic,
    log,
    metrics,
    etcd,
    kv,
    keys,
    reads,
    index: new TaskIndex(),
    fenceTarget,
    fences: new MicroBatcher(async (items) => {
      try {
        return (await fenceTarget.advanceBatch(items)).map((value) => ({ ok: true as const, value }));
      } catch (err) {
        // Whatever the port threw, the outcome at the sink is unknown: UNAVAILABLE.
        throw err instanceof LeaseholdError
          ? err
          : new SinkUnavailableError(`sink advance failed: ${String(err)}`, { cause: err });
      }
    }, 1_000),
    state: { shuttingDown: false },
  };
  const sessions = new SessionManager(ctx);
  const grants = new GrantService(ctx, sessions);
  sessions.onOwnersFreed(() => {
    grants.wake();
  });
  const leases = new LeaseService(ctx, sessions);
  const tasks = new TaskService(ctx, sessions);
  const feed = new WatchFeed({
    client: etcd,
    reads,
    keys,
    index: ctx.index,
    log: log.child({ component: 'watch' }),
    onGroup: createGroupHandler(ctx, sessions),
    onApplied: () => {
      grants.wake();
    },
  });

  try {
    await feed.start();
  } catch (err) {
    etcd.close();
    throw err;
  }
  sessions.start();

  const app = createHttpServer({
    adminKeys: config.adminKeys,
    maxPayloadBytes: config.http.maxPayloadBytes,
    tasks,
    metrics,
    log: log.child({ component: 'http' }),
    readiness: async () => ({
      etcd: await reads.session('0').then(
        () => true,
        () => false,
      ),
      sink: await fenceTarget.ping(),
      index: feed.ready,
      keepalive: sessions.keepaliveConnected,
    }),
  });
  const sockets = new WorkerSockets(app.server, {
    workerKeys: config.workerKeys,
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
      maxBadFrames: config.maxBadFrames,
      heartbeatIntervalMs: config.heartbeatIntervalMs,
      sessionTtlMs: config.sessionTtlMs,
    },
  });

  try {
    await app.listen({ host: config.http.host, port: config.http.port });
  } catch (err) {
    sessions.close();
    await feed.close();
    etcd.close();
    throw err;
  }
  const bound = app.server.address() as AddressInfo;
  if (config.http.portFile !== undefined) writeFileSync(config.http.portFile, `${bound.port}\n`);
  const host = config.http.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
  log.info({ url }, 'coordinator listening');

  let closing: Promise<void> | undefined;
  return {
    coordinatorId,
    address: { host, port: bound.port },
    url,
    metrics,
    close: () =>
      (closing ??= (async () => {
        ctx.state.shuttingDown = true;
        log.info('coordinator shutting down');
        sessions.close();
        grants.close();
        await sockets.close(CLOSE_GOING_AWAY, 'coordinator going away');
        await app.close();
        await feed.close();
        etcd.close();
        if (deps.fenceTarget === undefined) fenceTarget.close?.();
        log.info('coordinator stopped');
      })()),
  };
}
