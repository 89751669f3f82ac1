/**
 * Collects items submitted in the same turn of the event loop (up to `maxBatch`) and runs them as
 * one call: many owner keys in one etcd txn, many fence advances in one sink request. Each
 * submitter gets its own item's outcome; a failure of the whole call rejects every item of it.
 *
 * Trace context: a batch of one runs in its submitter's context (so a lone fence advance carries
 * the grant's `traceparent` to the sink); a batch of many runs in the root context, since one
 * request cannot continue several traces — each submitter's own span records its outcome.
 */
import { context, ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import type { Settled } from '../store/port.js';

export type { Settled } from '../store/port.js';

export class MicroBatcher<I, O> {
  readonly #run: (items: readonly I[]) => Promise<readonly Settled<O>[]>;
  readonly #maxBatch: number;
  #queue: { item: I; context: Context; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  #scheduled = false;

  constructor(run: (items: readonly I[]) => Promise<readonly Settled<O>[]>, maxBatch: number) {
    this.#run = run;
    this.#maxBatch = Math.max(1, maxBatch);
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.#queue.push({ item, context: context.active(), resolve, reject });
      if (this.#queue.length >= this.#maxBatch) this.#flush();
      else if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#scheduled = false;
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    while (this.#queue.length > 0) {
      const batch = this.#queue.slice(0, this.#maxBatch);
      this.#queue = this.#queue.slice(batch.length);
      const runIn = batch.length === 1 && batch[0] !== undefined ? batch[0].context : ROOT_CONTEXT;
      context
        .with(runIn, () => this.#run(batch.map((b) => b.item)))
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
        );
    }
  }
}
