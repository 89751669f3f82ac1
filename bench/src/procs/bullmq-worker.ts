/**
 * Child process: one BullMQ `Worker` (`concurrency` jobs at once) on the bench's Redis, whose
 * processor does nothing and returns a small result (BullMQ then moves the job to completed, which
 * the queue's `removeOnComplete` turns into a delete). Counts `completed` (ops) and `failed`
 * (errors) and reports completions to the parent every 10 ms (`done`), like procs/sdk-worker.ts.
 */
import { Worker } from 'bullmq';
import { send, serve, type Counters } from './protocol.js';

interface Params {
  readonly port: number;
  readonly queue: string;
  readonly concurrency: number;
}

const counters: Counters = { ops: 0, errors: 0 };
let worker: Worker | undefined;
let unreported = 0;
setInterval(() => {
  if (unreported > 0) {
    send({ type: 'done', n: unreported });
    unreported = 0;
  }
}, 10).unref();

serve<Params>({
  start(p) {
    counters.ops = 0;
    counters.errors = 0;
    const w = new Worker(p.queue, (job) => Promise.resolve({ done: job.id ?? '' }), {
      connection: { host: '127.0.0.1', port: p.port, maxRetriesPerRequest: null },
      concurrency: p.concurrency,
    });
    w.on('completed', () => {
      counters.ops += 1;
      unreported += 1;
    });
    w.on('failed', () => {
      counters.errors += 1;
    });
    w.on('error', () => {
      counters.errors += 1;
    });
    worker = w;
    return w.waitUntilReady().then(() => undefined);
  },
  sample: () => counters,
  async stop() {
    await worker?.close();
    worker = undefined;
    return {};
  },
});
