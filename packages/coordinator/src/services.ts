/**
 * The coordinator's service graph without transports: sessions, grants, leases, tasks, the watch
 * feed and its reactions, over a {@link LeaseStore} and a {@link FenceTarget}. `createCoordinator`
 * adds the etcd store, the sink client and the HTTP / WebSocket servers; unit tests build it over
 * the in-memory etcd with a manual clock and timers (see `testing/`).
 */
import { RepeatGate, type Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from './config.js';
import { TaskIndex } from './core/task-index.js';
import type { Timers } from './core/timers.js';
import { LeaseholdError, SinkUnavailableError } from './errors.js';
import type { FenceTarget } from './fence/fence-target.js';
import type { Metrics } from './metrics.js';
import { MicroBatcher } from './service/batcher.js';
import type { ServiceContext } from './service/context.js';
import { GrantService } from './service/grants.js';
import { LeaseService } from './service/leases.js';
import { createGroupHandler } from './service/reactions.js';
import { SessionManager } from './service/sessions.js';
import { EtcdHealth } from './service/etcd-health.js';
import { TaskEventService } from './service/events.js';
import { EtcdStatusPoller } from './service/etcd-status.js';
import { LayoutMigration } from './service/migration.js';
import { RetentionService } from './service/retention.js';
import { SettleService } from './service/settle.js';
import { TaskService } from './service/tasks.js';
import { WatchFeed } from './service/watch-feed.js';
import type { LeaseStore } from './store/port.js';

export interface ServiceDeps {
  readonly config: CoordinatorConfig;
  readonly coordinatorId: string;
  readonly store: LeaseStore;
  readonly fenceTarget: FenceTarget;
  readonly clock: Clock;
  /** Wall clock (epoch ms) for times stored in task records. Default `Date.now`. */
  readonly wallClock?: () => number;
  /** [0, 1) for backoff jitter. Default `Math.random`. */
  readonly random?: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Metrics;
}

export interface Services {
  readonly ctx: ServiceContext;
  readonly sessions: SessionManager;
  readonly grants: GrantService;
  readonly leases: LeaseService;
  readonly tasks: TaskService;
  readonly settle: SettleService;
  readonly etcdHealth: EtcdHealth;
  readonly events: TaskEventService;
  readonly feed: WatchFeed;
  readonly retention: RetentionService;
  readonly migration: LayoutMigration;
  readonly etcdStatus: EtcdStatusPoller;
  /** Build the index and start the watch and keepalives. Rejects when the store cannot be read. */
  start(): Promise<void>;
  /** Stop taking grants, close sessions' sockets ("going away"), stop the watch. */
  close(): Promise<void>;
}

export function createServices(deps: ServiceDeps): Services {
  const { fenceTarget, log } = deps;
  const wallClock = deps.wallClock ?? Date.now;
  const ctx: ServiceContext = {
    config: deps.config,
    coordinatorId: deps.coordinatorId,
    clock: deps.clock,
    wallClock,
    random: deps.random ?? Math.random,
    timers: deps.timers,
    log,
    repeats: new RepeatGate(),
    metrics: deps.metrics,
    store: deps.store,
    index: new TaskIndex({ wallClock, defaults: deps.config.retryPolicy }),
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
    state: { shuttingDown: false, etcdUnreachable: false },
  };
  const sessions = new SessionManager(ctx);
  const grants = new GrantService(ctx, sessions);
  const settle = new SettleService(ctx);
  const etcdHealth = new EtcdHealth(ctx, {
    onUnreachable: () => {
      sessions.handOffAll('etcd unreachable from this coordinator: resume on a peer');
      grants.close();
    },
    onReachable: () => undefined,
  });
  const events = new TaskEventService(ctx);
  sessions.onOwnersFreed((freed) => {
    for (const owner of freed) settle.ownerGone(owner, true);
    grants.wake();
  });
  const leases = new LeaseService(ctx, sessions);
  const tasks = new TaskService(ctx, sessions);
  const migration = new LayoutMigration({
    store: deps.store,
    log: log.child({ component: 'layout' }),
    timers: deps.timers,
    metrics: deps.metrics,
    holder: deps.coordinatorId,
  });
  const feed = new WatchFeed({
    store: deps.store,
    timers: deps.timers,
    index: ctx.index,
    log: log.child({ component: 'watch' }),
    onGroup: createGroupHandler(ctx, sessions, settle),
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
  const retention = new RetentionService(ctx, () => feed.ready);
  const etcdStatus = new EtcdStatusPoller(ctx);
  deps.metrics.taskCounts = () => {
    const stats = ctx.index.stats();
    return {
      pending: stats.pending - stats.delayed - stats.parked,
      delayed: stats.delayed,
      leased: stats.owned,
      completed: stats.ended.completed,
      failed: stats.ended.failed,
      cancelled: stats.ended.cancelled,
    };
  };

  return {
    ctx,
    sessions,
    grants,
    leases,
    tasks,
    settle,
    etcdHealth,
    events,
    feed,
    retention,
    migration,
    etcdStatus,
    start: async () => {
      await feed.start();
      sessions.start();
      etcdHealth.start();
      retention.start();
      etcdStatus.start();
    },
    close: async () => {
      ctx.state.shuttingDown = true;
      sessions.close();
      grants.close();
      settle.close();
      events.close();
      etcdHealth.close();
      retention.close();
      migration.close();
      etcdStatus.close();
      await feed.close();
    },
  };
}
