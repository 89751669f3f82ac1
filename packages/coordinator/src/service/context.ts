/** Everything the services share: config, clock, timers, logger, metrics, and the store / fence ports. */
import type { Clock, RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { LifecycleEnv } from '../core/lifecycle.js';
import type { TaskIndex } from '../core/task-index.js';
import type { Timers } from '../core/timers.js';
import type { AdvanceItem, AdvanceItemResult, FenceTarget } from '../fence/fence-target.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore } from '../store/port.js';
import type { MicroBatcher } from './batcher.js';

export interface ServiceContext {
  readonly config: CoordinatorConfig;
  readonly coordinatorId: string;
  /** Monotonic: session deadlines, timing. Never stored. */
  readonly clock: Clock;
  /**
   * Wall clock, epoch ms: only for times stored in task records (`notBeforeMs`, history), which
   * every coordinator reads. Schedules depend on coordinators' clocks being roughly in step (NTP);
   * safety never does.
   */
  readonly wallClock: () => number;
  /** [0, 1): backoff jitter. */
  readonly random: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  /** One log line per failure loop (the key names the loop), not one stack per attempt. */
  readonly repeats: RepeatGate;
  readonly metrics: Metrics;
  readonly store: LeaseStore;
  readonly index: TaskIndex;
  readonly fenceTarget: FenceTarget;
  /** Fence advances of one event-loop turn go to the sink as one advance-batch. */
  readonly fences: MicroBatcher<AdvanceItem, AdvanceItemResult>;
  readonly state: {
    shuttingDown: boolean;
    /** etcd has not answered for `etcdGiveUpMs`: sessions handed off, hellos refused. */
    etcdUnreachable: boolean;
  };
}

/**
 * etcd lease TTL (seconds) behind a session: the session TTL plus the configured margin. The
 * serving coordinator ends sessions at their deadline; the etcd lease is the backstop when it
 * cannot (it died, or lost etcd), and the margin is what lets a worker move to a peer and keep its
 * session — and what an etcd stall may last without ending healthy sessions.
 */
export function leaseTtlSeconds(config: Pick<CoordinatorConfig, 'sessionTtlMs' | 'etcdLeaseMarginMs'>): number {
  return Math.max(2, Math.ceil((config.sessionTtlMs + config.etcdLeaseMarginMs) / 1_000));
}

/** The lifecycle's view of now: wall clock, jitter source and the installation's retry policy. */
export function lifecycleEnv(ctx: ServiceContext): LifecycleEnv {
  return { nowMs: ctx.wallClock(), random: ctx.random, defaults: ctx.config.retryPolicy };
}
