/** Everything the services share: config, clock, logger, metrics and the etcd / sink ports. */
import type { Clock } from '@leasehold/protocol';
import type { Etcd3 } from 'etcd3';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { TaskIndex } from '../core/task-index.js';
import type { KeyLayout } from '../etcd/keys.js';
import type { Kv } from '../etcd/kv.js';
import type { EtcdReads } from '../etcd/reads.js';
import type { Metrics } from '../metrics.js';
import type { AdvanceItem, AdvanceItemResult, FenceTarget } from '../sink/fence-target.js';
import type { MicroBatcher } from './batcher.js';

export interface ServiceContext {
  readonly config: CoordinatorConfig;
  readonly coordinatorId: string;
  readonly clock: Clock;
  readonly log: Logger;
  readonly metrics: Metrics;
  readonly etcd: Etcd3;
  readonly kv: Kv;
  readonly keys: KeyLayout;
  readonly reads: EtcdReads;
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
