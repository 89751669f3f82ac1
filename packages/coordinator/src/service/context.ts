/**
 * The small pieces several services share. There is no service locator: each service declares the
 * narrow context it uses (`SessionsContext`, `GrantsContext`, …, in its own file, in the style of
 * BullMQ's `LockManagerWorkerContext`) and `services.ts` builds each one from the configuration —
 * copying only the settings the service reads, so a secret reaches only what signs or verifies.
 */
import type { Clock } from '@leasehold/protocol';
import type { CoordinatorConfig } from '../config.js';
import type { LifecycleEnv } from '../core/lifecycle.js';
import type { AdvanceItem, AdvanceItemResult } from '../fence/port.js';

/**
 * Process-wide switches the services read (and the two that set them write): one object shared by
 * reference. Each service sees it through `Readonly<Pick<…>>` of the flags it reads.
 */
export interface CoordinatorState {
  /** `close()` has begun: no new grants, hellos or sweeps. */
  shuttingDown: boolean;
  /** etcd has not answered for `etcdGiveUpMs`: sessions handed off, hellos refused (EtcdHealth sets it). */
  etcdUnreachable: boolean;
}

/** The time sources of a service: monotonic for deadlines, wall clock for stored times. */
export interface ServiceClocks {
  /** Monotonic: session deadlines, timing. Never stored. */
  readonly clock: Clock;
  /**
   * Wall clock, epoch ms: only for times stored in task records (`notBeforeMs`, history), which
   * every coordinator reads. Schedules depend on coordinators' clocks being roughly in step (NTP);
   * safety never does.
   */
  readonly wallClock: () => number;
}

/** What computing a task's next record needs: the wall clock, jitter and the installation's retry policy. */
export interface LifecycleContext {
  readonly wallClock: () => number;
  /** [0, 1): backoff jitter. */
  readonly random: () => number;
  readonly config: Pick<CoordinatorConfig, 'retryPolicy'>;
}

/** Fence advances of one event-loop turn go to the sink as one advance-batch (`MicroBatcher`). */
export interface FenceAdvances {
  submit(item: AdvanceItem): Promise<AdvanceItemResult>;
}

/** The lifecycle's view of now: wall clock, jitter source and the installation's retry policy. */
export function lifecycleEnv(ctx: LifecycleContext): LifecycleEnv {
  return { nowMs: ctx.wallClock(), random: ctx.random, defaults: ctx.config.retryPolicy };
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

/**
 * A frozen copy of `keys` of `config`: what a service may read of the configuration, and nothing
 * else (not the whole object typed narrowly — the other fields, secrets among them, are not there).
 */
export function settingsOf<K extends keyof CoordinatorConfig>(
  config: CoordinatorConfig,
  keys: readonly K[],
): Pick<CoordinatorConfig, K> {
  const out: Partial<Pick<CoordinatorConfig, K>> = {};
  for (const key of keys) out[key] = config[key];
  return Object.freeze(out as Pick<CoordinatorConfig, K>);
}
