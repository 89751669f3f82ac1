/** Everything the services share: config, clock, timers, logger, metrics, and the store / fence ports. */
import type { Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { TaskIndex } from '../core/task-index.js';
import type { Timers } from '../core/timers.js';
import type { AdvanceItem, AdvanceItemResult, FenceTarget } from '../fence/fence-target.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore } from '../store/port.js';
import type { MicroBatcher } from './batcher.js';

export interface ServiceContext {
  readonly config: CoordinatorConfig;
  readonly coordinatorId: string;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly store: LeaseStore;
  readonly index: TaskIndex;
  readonly fenceTarget: FenceTarget;
  /** Fence advances of one event-loop turn go to the sink as one advance-batch. */
  readonly fences: MicroBatcher<AdvanceItem, AdvanceItemResult>;
  readonly state: { shuttingDown: boolean };
}

/** etcd lease TTL (seconds) behind a session: a bit longer than the session TTL (the backstop). */
export function leaseTtlSeconds(sessionTtlMs: number): number {
  return Math.max(2, Math.ceil((sessionTtlMs + 1_000) / 1_000));
}
