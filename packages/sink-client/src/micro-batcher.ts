/**
 * Group commit for one kind of call (in the coordinator: many owner keys in one etcd txn, many
 * attempt ends in one txn, many fence advances in one sink request; in this client: many results
 * in one `POST /v1/writes/batch`). Items wait while `maxInFlight` calls of the kind
 * are running; when one returns, everything that arrived meanwhile leaves together (up to
 * `maxBatch` per call). So under load the batches grow instead of the calls queueing, as the
 * sink's fsync group commit does; with nothing in flight an item leaves at the end of the
 * event-loop turn it arrived in (what else arrives in that turn joins it). Each submitter gets
 * its own item's outcome; a failure of the whole call rejects every item of it.
 *
 * No rule depends on how items are grouped: a batch only delays an item (never reorders items of
 * one resource, which the coordinator's index holds keep apart; the sink decides each write of a
 * batch on its own), and the coordinator's batch txns fall back to one txn per item when a batch
 * compare fails (its core/batching.ts).
 *
 * Trace context: a batch of one runs in its submitter's context (so a lone fence advance carries
 * the grant's `traceparent` to the sink); a batch of many runs in the root context, since one
 * request cannot continue several traces — each submitter's own span records its outcome.
 */
import { context, ROOT_CONTEXT, type Context } from '@opentelemetry/api';

/** An item's outcome, or what its call threw (the outcome is then unknown). */
export type Settled<O> = { readonly ok: true; readonly value: O } | { readonly ok: false; readonly error: unknown };

export interface BatcherOptions {
  /** Calls of this kind running at once (default 1: classic group commit). */
  readonly maxInFlight?: number;
  /** Told the item count of every call (a batch-size histogram). */
  readonly observe?: (items: number) => void;
}

interface Waiting<I, O> {
  readonly item: I;
  readonly context: Context;
  readonly resolve: (o: O) => void;
  readonly reject: (e: unknown) => void;
}

export class MicroBatcher<I, O> {
  readonly #run: (items: readonly I[]) => Promise<readonly Settled<O>[]>;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  readonly #observe: ((items: number) => void) | undefined;
  #queue: Waiting<I, O>[] = [];
  #scheduled = false;
  #inFlight = 0;

  constructor(
    run: (items: readonly I[]) => Promise<readonly Settled<O>[]>,
    maxBatch: number,
    options: BatcherOptions = {},
  ) {
    this.#run = run;
    this.#maxBatch = Math.max(1, maxBatch);
    this.#maxInFlight = Math.max(1, options.maxInFlight ?? 1);
    this.#observe = options.observe;
  }

  /** Calls running now (for tests and gauges). */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Items waiting for a call. */
  get waiting(): number {
    return this.#queue.length;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, context: context.active(), resolve, reject });
      this.#schedule();
    });
  }

  /** Flush at the end of this turn, unless every call slot is taken (a returning call flushes). */
  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  #flush(): void {
    while (this.#queue.length > 0 && this.#inFlight < this.#maxInFlight) {
      const batch = this.#queue.length <= this.#maxBatch ? this.#queue : this.#queue.slice(0, this.#maxBatch);
      this.#queue = this.#queue.length <= this.#maxBatch ? [] : this.#queue.slice(batch.length);
      this.#inFlight += 1;
      this.#observe?.(batch.length);
      const runIn = batch.length === 1 && batch[0] !== undefined ? batch[0].context : ROOT_CONTEXT;
      let call: Promise<readonly Settled<O>[]>;
      try {
        call = context.with(runIn, () => this.#run(batch.map((b) => b.item)));
      } catch (err) {
        call = Promise.reject(err instanceof Error ? err : new Error(String(err)));
      }
      call
        .then(
          (results) => {
            batch.forEach((b, i) => {
              const r = results[i];
              if (r === undefined) b.reject(new Error('batch returned too few results'));
              else if (r.ok) b.resolve(r.value);
              else b.reject(r.error);
            });
          },
          (err: unknown) => {
            for (const b of batch) b.reject(err);
          },
        )
        .finally(() => {
          this.#inFlight -= 1;
          // What arrived while this call ran leaves now, with what this turn's continuations add.
          if (this.#queue.length > 0) this.#schedule();
        });
    }
  }
}
