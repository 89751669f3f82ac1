/**
 * Retention of ended tasks, on by default: every `RETENTION_INTERVAL_MS` each coordinator plans a
 * sweep from its index's ended tasks ({@link planRetention}: by age, by count, by bytes) — nothing
 * is read from etcd to decide. When there is something to remove it takes the retention lock
 * (`locks/retention`, on a short lease of its own: one coordinator sweeps at a time, a dead
 * holder's lock goes with its lease) and deletes each task's record, payload and history with
 * `purgeTasks`, which compares the record's mod_revision as the index saw it: a task retried since
 * stays, and a sweep planned from a stale index can only miss, never remove the wrong record.
 *
 * At NOSPACE etcd refuses the lock's lease but still runs deletes: the sweep then goes on without
 * the lock (the compares make that safe; the lock only saves work), so retention frees space
 * for the compaction and defragmentation an operator runs next.
 *
 * The sink's results and decision log are untouched: they stay the record of what was written.
 * Visible: `leasehold_coordinator_retention_removed_total{state,reason}`,
 * `leasehold_coordinator_retention_sweeps_total{outcome}`, a debug line per sweep, a gated warning
 * on failure.
 */
import { RepeatGate, type Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { forgetPurged, planRetention, type Removal } from '../core/retention.js';
import type { TaskIndex } from '../core/task-index.js';
import type { TimerHandle, Timers } from '../core/timers.js';
import { isStorageFull } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore, StoreLock } from '../store/port.js';
import type { CoordinatorState } from './context.js';

/** What the retention sweeper uses. */
export interface RetentionContext {
  /** Who holds the retention lock (the coordinator id). */
  readonly coordinatorId: string;
  readonly config: Pick<CoordinatorConfig, 'retention'>;
  readonly clock: Clock;
  readonly wallClock: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'retentionSweeps' | 'retentionRemoved'>;
  readonly store: Pick<LeaseStore, 'acquireLock' | 'releaseLock' | 'purgeTasks'>;
  readonly index: Pick<TaskIndex, 'endedTasks' | 'applyOwnDelete'>;
  readonly state: Readonly<Pick<CoordinatorState, 'shuttingDown'>>;
}

export class RetentionService {
  readonly #ctx: RetentionContext;
  readonly #ready: () => boolean;
  readonly #repeats = new RepeatGate();
  #timer: TimerHandle | undefined;
  #running: Promise<void> | undefined;
  #closed = false;

  constructor(ctx: RetentionContext, ready: () => boolean) {
    this.#ctx = ctx;
    this.#ready = ready;
  }

  start(): void {
    if (!this.#ctx.config.retention.enabled) return;
    this.#arm();
  }

  close(): void {
    this.#closed = true;
    this.#ctx.timers.clearTimeout(this.#timer);
  }

  /** One sweep now (tests; the timer runs the same). Resolves when it is over. */
  sweep(): Promise<void> {
    this.#running ??= this.#sweep().finally(() => (this.#running = undefined));
    return this.#running;
  }

  #arm(): void {
    if (this.#closed) return;
    this.#timer = this.#ctx.timers.setTimeout(() => {
      void this.sweep().finally(() => {
        this.#arm();
      });
    }, this.#ctx.config.retention.intervalMs);
  }

  /** What a sweep now would remove (oldest first, at most RETENTION_BATCH). */
  plan(): Removal[] {
    const r = this.#ctx.config.retention;
    return planRetention(this.#ctx.index.endedTasks(), r, this.#ctx.wallClock(), r.batch);
  }

  async #sweep(): Promise<void> {
    const ctx = this.#ctx;
    if (this.#closed || ctx.state.shuttingDown || !this.#ready()) return;
    const removals = this.plan();
    if (removals.length === 0) {
      ctx.metrics.retentionSweeps.inc({ outcome: 'idle' });
      return;
    }
    const startedMs = ctx.clock.nowMs();
    try {
      const ttlSeconds = Math.max(5, Math.ceil((3 * ctx.config.retention.intervalMs) / 1_000));
      const lock: StoreLock | 'none' | undefined = await ctx.store
        .acquireLock('retention', ctx.coordinatorId, ttlSeconds)
        .catch((err: unknown) => {
          if (isStorageFull(err)) return 'none' as const;
          throw err;
        });
      if (lock === undefined) {
        ctx.metrics.retentionSweeps.inc({ outcome: 'locked' });
        ctx.log.debug({ planned: removals.length }, 'retention sweep skipped: a peer holds the lock');
        return;
      }
      let removed: string[];
      try {
        removed = await ctx.store.purgeTasks(removals);
      } finally {
        if (lock !== 'none') await ctx.store.releaseLock('retention', lock).catch(() => undefined);
      }
      forgetPurged(ctx.index, removals, removed);
      const gone = new Set(removed);
      const byState: Record<string, number> = {};
      for (const r of removals) {
        if (!gone.has(r.taskId)) continue;
        ctx.metrics.retentionRemoved.inc({ state: r.state, reason: r.reason });
        byState[r.state] = (byState[r.state] ?? 0) + 1;
      }
      ctx.metrics.retentionSweeps.inc({ outcome: 'done' });
      ctx.log.debug(
        {
          planned: removals.length,
          removed: removed.length,
          changed: removals.length - removed.length,
          byState,
          ms: Math.round(ctx.clock.nowMs() - startedMs),
        },
        'retention sweep',
      );
    } catch (err) {
      ctx.metrics.retentionSweeps.inc({ outcome: 'failed' });
      const gate = this.#repeats.note('retention', ctx.clock.nowMs());
      if (gate.log) ctx.log.warn({ err, repeated: gate.suppressed }, 'retention sweep failed; the next one retries');
    }
  }
}
