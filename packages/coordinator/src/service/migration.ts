/**
 * Converts task records of layout v1 (payload and history inside `tasks/<t>`, written by
 * coordinators before 0.3) to layout v2 — the payload under `inputs/<t>`, the history under
 * `history/<t>#<n>` — as the watch feed meets them: in the snapshot a coordinator starts from, and
 * in the watch (a coordinator of the old layout still submitting during a rolling upgrade).
 *
 * Only records without an open attempt are converted here: an open attempt's token is the task
 * key's mod_revision, which a rewrite would move; such a record is converted by the txn that
 * closes the attempt (complete, fail, release, settlement, cancel), in passing. Until converted a
 * v1 record is parked in the index: never granted.
 *
 * Idempotent and safe with several coordinators at once: each conversion compares the record's
 * mod_revision as read, so a second conversion of a record is a failed compare and changes
 * nothing. To keep coordinators that start together from doing the same work, one converts at a
 * time (the lock `locks/migration`, on a short lease, taken per batch); the others wait, and drop
 * from their queues what their watch shows converted ({@link LayoutMigration.seen}).
 */
import { RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore, MigrateItem, StoredTask } from '../store/port.js';

/**
 * Records per round, under one lock: read again (by id, in replies bounded by the receive limit),
 * then converted (the store splits them into txns by ops and bytes). The queue itself holds ids
 * and revisions only — never the old records' payloads — so it is bounded by ~100 bytes a record.
 */
const CALL_ITEMS = 64;
const RETRY_MS = 1_000;
/** A peer holds the lock: look again this soon. */
const LOCKED_MS = 200;
const LOCK_TTL_SECONDS = 10;

/** What the converter needs of the store: its lock, the records read again, the conversion txn. */
type MigrationStore = Pick<LeaseStore, 'acquireLock' | 'releaseLock' | 'tasksByIds' | 'migrateTasks'>;

export class LayoutMigration {
  readonly #store: MigrationStore;
  readonly #log: Logger;
  readonly #timers: Timers;
  readonly #metrics: Pick<Metrics, 'layoutConversions'>;
  readonly #holder: string;
  /** Waiting conversions: task id -> the mod_revision of the v1 record seen (the latest wins). */
  readonly #queue = new Map<string, bigint>();
  readonly #repeats = new RepeatGate();
  #running: Promise<void> | undefined;
  #closed = false;
  #converted = 0;

  constructor(deps: {
    readonly store: MigrationStore;
    readonly log: Logger;
    readonly timers: Timers;
    readonly metrics: Pick<Metrics, 'layoutConversions'>;
    /** Who holds the lock (the coordinator id). */
    readonly holder: string;
  }) {
    this.#store = deps.store;
    this.#log = deps.log;
    this.#timers = deps.timers;
    this.#metrics = deps.metrics;
    this.#holder = deps.holder;
  }

  /** Records of layout v1 seen: those without an open attempt are queued for conversion. */
  offer(tasks: readonly StoredTask[]): void {
    if (this.#closed) return;
    for (const t of tasks) {
      if (t.legacy === undefined || t.record.open !== undefined) continue;
      this.#queue.set(t.record.taskId, t.modRevision);
    }
    if (this.#queue.size > 0) this.#running ??= this.#drain().finally(() => (this.#running = undefined));
  }

  /** The watch showed `taskId` written again (converted by a peer, or changed): not ours to convert. */
  seen(taskId: string, modRevision: bigint): void {
    const queued = this.#queue.get(taskId);
    if (queued !== undefined && queued !== modRevision) this.#queue.delete(taskId);
  }

  /** Conversions waiting (tests, logs). */
  get waiting(): number {
    return this.#queue.size;
  }

  /** Resolves when nothing is waiting or running. */
  async idle(): Promise<void> {
    while (this.#running !== undefined) await this.#running;
  }

  close(): void {
    this.#closed = true;
    this.#queue.clear();
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => this.#timers.setTimeout(resolve, ms));
  }

  async #drain(): Promise<void> {
    this.#log.info({ records: this.#queue.size }, 'converting task records of layout v1');
    let failures = 0;
    while (!this.#closed && this.#queue.size > 0) {
      const round = [...this.#queue].slice(0, CALL_ITEMS);
      const ids = round.map(([id]) => id);
      try {
        const lock = await this.#store.acquireLock('migration', this.#holder, LOCK_TTL_SECONDS);
        if (lock === undefined) {
          // A peer converts: its conversions reach this queue through the watch (seen).
          await this.#sleep(LOCKED_MS);
          continue;
        }
        let converted = 0;
        let read: readonly StoredTask[];
        try {
          // The records as they are now (a peer may have converted some; each conversion compares
          // the mod_revision read here).
          read = await this.#store.tasksByIds(ids);
          const batch: MigrateItem[] = [];
          for (const t of read) {
            if (t.legacy === undefined || t.record.open !== undefined) continue;
            batch.push({ modRevision: t.modRevision, record: t.record, legacy: t.legacy });
          }
          if (batch.length > 0) converted = await this.#store.migrateTasks(batch);
        } finally {
          await this.#store.releaseLock('migration', lock).catch(() => undefined);
        }
        this.#converted += converted;
        this.#metrics.layoutConversions.inc(converted);
        // Converted, converted by a peer, deleted, or opened (its closing txn converts it); one
        // written again as v1 meanwhile is offered again by the watch.
        for (const [id, revision] of round) if (this.#queue.get(id) === revision) this.#queue.delete(id);
        failures = 0;
      } catch (err) {
        failures += 1;
        const gate = this.#repeats.note('migrate', Date.now());
        if (gate.log) {
          this.#log.warn(
            { err, waiting: this.#queue.size, repeated: gate.suppressed },
            'layout v1 conversion failed; will retry',
          );
        }
        await this.#sleep(Math.min(10_000, RETRY_MS * failures));
      }
    }
    if (!this.#closed) this.#log.info({ converted: this.#converted }, 'task records of layout v1 converted');
  }
}
