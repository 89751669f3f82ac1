/**
 * Child process: one BullMQ `Worker` (`concurrency` jobs at once) on the bench's Redis, whose
 * processor does nothing and returns a small result (BullMQ then moves the job to completed, which
 * the queue's `removeOnComplete` turns into a delete). Counts `completed` (ops) and `failed`
 * (errors) and reports completions to the parent at most every 10 ms (`done`), like procs/sdk-worker.ts.
 */
import { Worker } from 'bullmq';
import { doneReporter, serve, type Counters } from './protocol.js';

interface Params {
  readonly port: number;
  readonly queue: string;
  readonly concurrency: number;
}

const counters: Counters = { ops: 0, errors: 0 };
let worker: Worker | undefined;
const completed = doneReporter();

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
      completed();
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
