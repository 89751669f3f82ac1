/**
 * The coordinator's service graph without transports: sessions, grants, leases, tasks, the watch
 * feed and its reactions, the console's read model, over a {@link LeaseStore} and a
 * {@link FenceTarget}. `createCoordinator` adds the etcd store, the sink client and the HTTP /
 * WebSocket servers; unit tests build it over the in-memory etcd of `@leasehold/testing` with a
 * manual clock and timers (see `testing/`).
 *
 * There is no shared context: each service gets the narrow context it declares (`SessionsContext`,
 * `GrantsContext`, …), with only the settings it reads copied out of the configuration
 * ({@link settingsOf}). The capability signing key reaches only the grant delivery (in a signing
 * closure) and readiness (its probe signs one); no service sees the admin keys, worker credentials,
 * the sink key or the etcd password.
 */
import { RepeatGate, signCapability, type Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { TaskIndex } from './core/task-index.js';
import type { Timers } from './core/timers.js';
import { LeaseholdError, SinkUnavailableError } from './errors.js';
import type { AdvanceItem, AdvanceItemResult, FenceTarget, SinkObserver } from './fence/port.js';
import type { Metrics } from './metrics.js';
import { MicroBatcher } from '@leasehold/sink-client';
import { ConsoleReadModel } from './service/console/console-read-model.js';
import { settingsOf, type CoordinatorState } from './service/context.js';
import { EtcdHealth } from './service/etcd-health.js';
import { EtcdStatusPoller } from './service/etcd-status.js';
import { TaskEventService } from './service/events.js';
import { CarriedAcquires } from './service/carried-acquire.js';
import { GrantService } from './service/grants.js';
import { LeaseService } from './service/leases.js';
import { LayoutMigration } from './service/migration.js';
import { createGroupHandler } from './service/reactions.js';
import { RetentionService } from './service/retention.js';
import { SessionManager } from './service/sessions.js';
import { SettleService } from './service/settle.js';
import type { RetryPolicyOf } from './service/task-submit.js';
import { TaskService } from './service/tasks.js';
import { WatchFeed } from './service/watch-feed.js';
import { CoordinatorPeers } from './core/peers.js';
import type { LeaseStore } from './store/port.js';

export interface ServiceDeps {
  readonly config: CoordinatorConfig;
  readonly coordinatorId: string;
  readonly store: LeaseStore;
  readonly fenceTarget: FenceTarget;
  /** The sink's events and fences for the console; default: none shown. */
  readonly sinkObserver?: SinkObserver;
  readonly clock: Clock;
  /** Wall clock (epoch ms) for times stored in task records. Default `Date.now`. */
  readonly wallClock?: () => number;
  /** [0, 1) for backoff jitter. Default `Math.random`. */
  readonly random?: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** The retry policy a submitted task is stored with; default: the submitted one (see task-submit.ts). */
  readonly retryPolicyOf?: RetryPolicyOf;
}

export interface Services {
  readonly sessions: SessionManager;
  readonly grants: GrantService;
  readonly leases: LeaseService;
  /** Completions that carry their slot's next acquire (`task.complete.next`). */
  readonly carried: CarriedAcquires;
  readonly tasks: TaskService;
  readonly settle: SettleService;
  readonly etcdHealth: EtcdHealth;
  readonly events: TaskEventService;
  readonly feed: WatchFeed;
  readonly retention: RetentionService;
  readonly migration: LayoutMigration;
  readonly etcdStatus: EtcdStatusPoller;
  /** The web console's read model (built on its first use). */
  readonly console: ConsoleReadModel;
  /** The watch-fed index of tasks and owners (what grants select from). */
  readonly index: TaskIndex;
  /** Shutting down / etcd unreachable: the flags the transports read too. */
  readonly state: Readonly<CoordinatorState>;
  readonly metrics: Metrics;
  /** Build the index and start the watch and keepalives. Rejects when the store cannot be read. */
  start(): Promise<void>;
  /** Stop taking grants, close sessions' sockets ("going away"), stop the watch. */
  close(): Promise<void>;
}

export function createServices(deps: ServiceDeps): Services {
  const { config, coordinatorId, store, fenceTarget, clock, timers, log, metrics } = deps;
  const wallClock = deps.wallClock ?? Date.now;
  const random = deps.random ?? Math.random;
  const repeats = new RepeatGate();
  const state: CoordinatorState = { shuttingDown: false, etcdUnreachable: false };
  const index = new TaskIndex({ wallClock, defaults: config.retryPolicy });
  const peers = new CoordinatorPeers();
  // Fence advances of one event-loop turn go to the sink as one advance-batch; those of takeover
  // grants in a group commit of their own, so they never wait behind an ordinary batch in flight.
  const advances = (kind: string) =>
    new MicroBatcher<AdvanceItem, AdvanceItemResult>(
      async (items) => {
        try {
          return (await fenceTarget.advanceBatch(items)).map((value) => ({ ok: true as const, value }));
        } catch (err) {
          // Whatever the port threw, the outcome at the sink is unknown: UNAVAILABLE.
          throw err instanceof LeaseholdError
            ? err
            : new SinkUnavailableError(`sink advance failed: ${String(err)}`, { cause: err });
        }
      },
      1_000,
      {
        observe: (n) => {
          metrics.batchItems.observe({ kind }, n);
        },
      },
    );
  const fences = advances('fence_advance');
  const takeoverFences = advances('fence_advance_takeover');
  const signingKey = config.capabilitySigningKey;
  // What the grant and settle services both decide with: clocks, randomness, timers, the store and the index.
  const scheduling = { clock, wallClock, random, timers, log, repeats, metrics, store, index };

  const sessions = new SessionManager({
    coordinatorId,
    config: settingsOf(config, ['sessionTtlMs', 'maxSessionsPerWorker', 'heartbeatIntervalMs', 'etcdLeaseMarginMs']),
    inflightGraceMs: config.sink.timeoutMs + 500,
    clock,
    timers,
    log,
    metrics,
    store,
    index,
    state,
  });
  const grants = new GrantService(
    {
      config: settingsOf(config, ['grantBatchMax', 'noLeaseRetryAfterMs', 'retryPolicy']),
      ...scheduling,
      fences,
      takeoverFences,
      signCapability: (claims) => signCapability(signingKey, claims),
      state,
      peers: { coordinatorId, table: peers },
    },
    sessions,
  );
  const settle = new SettleService({
    config: settingsOf(config, ['settleGraceMs', 'retryPolicy']),
    ...scheduling,
  });
  const etcdHealth = new EtcdHealth(
    { config: settingsOf(config, ['etcdGiveUpMs']), clock, timers, log, metrics, store, state },
    {
      onUnreachable: () => {
        sessions.handOffAll('etcd unreachable from this coordinator: resume on a peer');
        grants.close();
      },
      onReachable: () => undefined,
    },
  );
  const events = new TaskEventService({
    config: settingsOf(config, ['retryPolicy']),
    wallClock,
    timers,
    log,
    store,
    index,
  });
  sessions.foldSettlements(settle);
  sessions.onOwnersFreed((freed) => {
    for (const owner of freed) settle.ownerGone(owner, true);
    grants.wake();
  });
  const leases = new LeaseService(
    { config: settingsOf(config, ['retryPolicy']), wallClock, random, log, metrics, store, index },
    sessions,
  );
  const carried = new CarriedAcquires({ leases, grants, clock, timers, metrics });
  const tasks = new TaskService(
    {
      config: settingsOf(config, ['maxTaskPayloadBytes', 'retryPolicy']),
      ...(deps.retryPolicyOf === undefined ? {} : { retryPolicyOf: deps.retryPolicyOf }),
      wallClock,
      log,
      metrics,
      store,
      index,
      fences,
    },
    sessions,
  );
  const migration = new LayoutMigration({
    store,
    log: log.child({ component: 'layout' }),
    timers,
    metrics,
    holder: coordinatorId,
  });
  const feed = new WatchFeed({
    store,
    timers,
    index,
    peers,
    log: log.child({ component: 'watch' }),
    onGroup: createGroupHandler(
      {
        coordinatorId,
        config: settingsOf(config, ['fenceOnExpiry']),
        clock,
        log,
        repeats,
        metrics,
        fences,
        state,
      },
      sessions,
      settle,
    ),
    onApplied: () => {
      grants.wake();
    },
    onBuilt: () => {
      settle.sweep();
    },
    onLegacy: (old) => {
      migration.offer(old);
    },
    onTaskWritten: (taskId, modRevision) => {
      migration.seen(taskId, modRevision);
    },
  });
  const retention = new RetentionService(
    {
      coordinatorId,
      config: settingsOf(config, ['retention']),
      clock,
      wallClock,
      timers,
      log,
      metrics,
      store,
      index,
      state,
    },
    () => feed.ready,
  );
  const etcdStatus = new EtcdStatusPoller({
    config: { etcd: { quotaBytes: config.etcd.quotaBytes, statusIntervalMs: config.etcd.statusIntervalMs } },
    timers,
    log,
    metrics,
    store,
  });
  const consoleReadModel = new ConsoleReadModel({
    coordinatorId,
    config: settingsOf(config, ['retryPolicy']),
    store,
    feed,
    sink: deps.sinkObserver,
    remainingMs: (sessionId) => {
      const local = sessions.get(sessionId);
      return local === undefined || !sessions.isLive(local) ? undefined : sessions.remainingMs(local);
    },
    wallClock,
    log: log.child({ component: 'console' }),
  });
  metrics.taskCounts = () => index.queueCounts();

  return {
    sessions,
    grants,
    leases,
    carried,
    tasks,
    settle,
    etcdHealth,
    events,
    feed,
    retention,
    migration,
    etcdStatus,
    console: consoleReadModel,
    index,
    state,
    metrics,
    start: async () => {
      await feed.start();
      sessions.start();
      etcdHealth.start();
      retention.start();
      etcdStatus.start();
    },
    close: async () => {
      state.shuttingDown = true;
      sessions.close();
      grants.close();
      settle.close();
      events.close();
      etcdHealth.close();
      retention.close();
      migration.close();
      etcdStatus.close();
      await consoleReadModel.close();
      await feed.close();
    },
  };
}
