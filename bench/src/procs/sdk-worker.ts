/**
 * Child process: one leasehold worker SDK instance (`startWorker`, `concurrency` slots) whose
 * handler does nothing but return a small result; the SDK writes it to the sink under the grant's
 * token and completes the task. Counts `completed` (ops) and `refused` / `lease-lost` (errors),
 * and tells the parent at most every 10 ms how many completed since the last message (`done`), which the
 * bench's submitter uses to keep its backlog bounded.
 */
import { startWorker, type Worker } from '@leasehold/worker';
import WebSocket from 'ws';
import { doneReporter, serve, type Counters } from './protocol.js';

// Count the WebSocket frames this worker exchanges with the coordinator (same `ws` module instance
// as the SDK's): frames per task is evidence for the profiles (docs/benchmarks.md).
const frames = { in: 0, out: 0 };
const proto = WebSocket.prototype as unknown as {
  send: (...args: unknown[]) => void;
  emit: (event: string | symbol, ...args: unknown[]) => boolean;
};
const originalSend = proto.send;
const originalEmit = proto.emit;
proto.send = function (this: unknown, ...args: unknown[]) {
  frames.out += 1;
  originalSend.apply(this, args);
};
proto.emit = function (this: unknown, event: string | symbol, ...args: unknown[]) {
  if (event === 'message') frames.in += 1;
  return originalEmit.apply(this, [event, ...args]);
};

interface Params {
  readonly coordinatorUrl: string;
  readonly sinkUrl: string;
  readonly workerKey: string;
  readonly workerId: string;
  readonly concurrency: number;
}

const counters: Counters = { ops: 0, errors: 0 };
let worker: Worker | undefined;
const framesAtBegin = { in: 0, out: 0, ops: 0 };
const framesAtEnd = { in: 0, out: 0, ops: 0 };
const completed = doneReporter();

serve<Params>({
  start(p) {
    counters.ops = 0;
    counters.errors = 0;
    const w = startWorker({
      coordinators: [p.coordinatorUrl],
      sink: { url: p.sinkUrl },
      credentials: { workerKey: p.workerKey },
      workerId: p.workerId,
      concurrency: p.concurrency,
      idleBackoffMs: 20,
      handler: (task) => ({ done: task.taskId }),
    });
    w.on('*', (e) => {
      if (e.type === 'completed') {
        counters.ops += 1;
        completed();
      } else if (e.type === 'refused' || e.type === 'lease-lost') counters.errors += 1;
    });
    worker = w;
    return Promise.resolve();
  },
  sample(mark) {
    if (mark === 'begin') Object.assign(framesAtBegin, frames, { ops: counters.ops });
    if (mark === 'end') Object.assign(framesAtEnd, frames, { ops: counters.ops });
    return counters;
  },
  async stop() {
    await worker?.close(2_000);
    worker = undefined;
    return {
      framesIn: framesAtEnd.in - framesAtBegin.in,
      framesOut: framesAtEnd.out - framesAtBegin.out,
      windowOps: framesAtEnd.ops - framesAtBegin.ops,
    };
  },
});
