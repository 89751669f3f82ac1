/**
 * Group commit around the event loop.
 *
 * better-sqlite3 is synchronous: a commit (with its fsync) blocks the event loop. So requests are
 * not committed one by one as they arrive; they are queued, and one `setImmediate` flush per
 * event-loop turn commits everything queued so far in ONE transaction. While a commit runs, new
 * requests pile up in the socket buffers; the next turn parses them all and they form the next
 * batch. Batches therefore grow with load and stay at one op when idle (no added latency timer).
 * With an asynchronous store (PostgreSQL) the same holds: no flush starts while one is in flight.
 *
 * Each submission's ops stay together and in order inside one batch (an advance-batch request is
 * one commit). Promises resolve only after the store's commit is durable. If a commit fails, every
 * submission of that batch is rejected with UNAVAILABLE (nothing of it was applied).
 */
import { LeaseholdError, RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { FenceOp, OpDecision } from '../core/ops.js';
import { ShuttingDownError, storeUnavailable } from '../errors.js';
import type { SinkMetrics } from '../metrics.js';
import type { FenceStore } from '../store/port.js';

interface Pending {
  readonly ops: readonly FenceOp[];
  readonly resolve: (decisions: readonly OpDecision[]) => void;
  readonly reject: (err: unknown) => void;
}

export interface GroupCommitterOptions {
  readonly store: FenceStore;
  readonly logger: Logger;
  readonly metrics?: SinkMetrics | undefined;
  /** Upper bound of ops per transaction (a single larger submission still commits whole). */
  readonly maxBatchOps?: number | undefined;
  /** Called after every durable commit (before its submitters are answered). Must not throw. */
  readonly onCommitted?: (() => void) | undefined;
}

export class GroupCommitter {
  readonly #store: FenceStore;
  readonly #log: Logger;
  /** One log line per run of failed commits (an outage fails every batch until it ends). */
  readonly #repeats = new RepeatGate();
  readonly #metrics: SinkMetrics | undefined;
  readonly #maxBatchOps: number;
  readonly #onCommitted: (() => void) | undefined;
  #queue: Pending[] = [];
  #scheduled = false;
  #inFlight = false;
  #closing = false;
  #idleWaiters: (() => void)[] = [];

  constructor(options: GroupCommitterOptions) {
    this.#store = options.store;
    this.#log = options.logger;
    this.#metrics = options.metrics;
    this.#maxBatchOps = options.maxBatchOps ?? 1000;
    this.#onCommitted = options.onCommitted;
  }

  get closing(): boolean {
    return this.#closing;
  }

  /** Queue `ops` for the next group commit; resolves with their decisions once durable. */
  submit(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    if (this.#closing) return Promise.reject(new ShuttingDownError());
    return new Promise((resolve, reject) => {
      this.#queue.push({ ops, resolve, reject });
      this.#schedule();
    });
  }

  /** Stop taking work, commit everything already queued, resolve when nothing is in flight. */
  close(): Promise<void> {
    this.#closing = true;
    if (this.#isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  #isIdle(): boolean {
    return this.#queue.length === 0 && !this.#inFlight && !this.#scheduled;
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      void this.#flush();
    });
  }

  #take(): Pending[] {
    let count = 0;
    let n = 0;
    while (n < this.#queue.length) {
      const size = this.#queue[n]?.ops.length ?? 0;
      if (n > 0 && count + size > this.#maxBatchOps) break;
      count += size;
      n++;
    }
    return this.#queue.splice(0, n);
  }

  async #flush(): Promise<void> {
    const batch = this.#take();
    if (batch.length === 0) {
      this.#afterFlush();
      return;
    }
    const ops = batch.flatMap((p) => p.ops);
    this.#inFlight = true;
    const started = performance.now();
    try {
      const decisions = await this.#store.applyBatch(ops);
      const seconds = (performance.now() - started) / 1000;
      this.#metrics?.commitSeconds.observe(seconds);
      this.#metrics?.batchOps.observe(ops.length);
      this.#log.debug({ ops: ops.length, submissions: batch.length, seconds }, 'batch committed');
      this.#onCommitted?.();
      const hidden = this.#repeats.clear('outage') + this.#repeats.clear('fault');
      if (hidden > 0) this.#log.info({ repeated: hidden }, 'batch commits succeed again');
      let at = 0;
      for (const pending of batch) {
        pending.resolve(decisions.slice(at, at + pending.ops.length));
        at += pending.ops.length;
      }
    } catch (err) {
      this.#metrics?.commitFailures.inc();
      // A store that says it is unavailable (PostgreSQL down, a connection cut) is an outage the
      // sink rides out with 503s: warn, once per failure loop. Anything else is a fault: error.
      const outage = err instanceof LeaseholdError && err.code === 'UNAVAILABLE';
      const gate = this.#repeats.note(outage ? 'outage' : 'fault', performance.now());
      if (gate.log) {
        const fields = { err, ops: ops.length, repeated: gate.suppressed };
        if (outage) this.#log.warn(fields, 'batch commit failed: store unavailable');
        else this.#log.error(fields, 'batch commit failed');
      }
      const error = storeUnavailable(err);
      for (const pending of batch) pending.reject(error);
    } finally {
      this.#inFlight = false;
    }
    this.#afterFlush();
  }

  #afterFlush(): void {
    if (this.#queue.length > 0) {
      this.#schedule();
      return;
    }
    if (this.#isIdle()) {
      const waiters = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const wake of waiters) wake();
    }
  }
}
