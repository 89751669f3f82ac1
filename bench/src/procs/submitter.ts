/**
 * Child process: submit `count` tasks through the admin API's batch submit (`POST
 * /v1/tasks/batch`, `batch` tasks per request, `concurrency` requests in flight), as the scale
 * suite's load. Task i (from `from`) is `<idPrefix><i>` on resource `<resourcePrefix><i>` with a
 * payload of about `payloadBytes` of JSON. A request that fails (timeout, 5xx, connection refused)
 * is sent again — the submit is idempotent by task id — up to 5 times with backoff; after that its
 * tasks count as errors and the run goes on (a coordinator that died fails every request quickly).
 *
 * `sample` reports tasks accepted (`ops`) and tasks not accepted (`errors`) so far; `stop` waits for
 * the run to finish and returns `{ elapsedMs, requests, retries, refused, firstError, slices }`,
 * where `slices` is the number of tasks accepted in each second since the start.
 */
import { Admin, pool } from '../infra/raw-worker.js';
import { serve, type Counters } from './protocol.js';

interface Params {
  readonly url: string;
  readonly adminKey: string;
  readonly idPrefix: string;
  readonly resourcePrefix: string;
  readonly from: number;
  readonly count: number;
  readonly batch: number;
  readonly concurrency: number;
  readonly payloadBytes: number;
  readonly priority?: number;
}

const counters: Counters = { ops: 0, errors: 0 };
const slices: number[] = [];
let requests = 0;
let retries = 0;
let refused = 0;
let firstError = '';
let run: Promise<number> | undefined;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A JSON payload of about `bytes` bytes (`{"n":…,"pad":"xxx…"}`). */
function payloadOf(i: number, bytes: number): { n: number; pad?: string } {
  const bare = JSON.stringify({ n: i }).length;
  return bytes <= bare + 10 ? { n: i } : { n: i, pad: 'x'.repeat(bytes - bare - 9) };
}

async function submitAll(p: Params): Promise<number> {
  const admin = new Admin(p.url, p.adminKey, 120_000);
  const t0 = performance.now();
  const batches = Math.ceil(p.count / p.batch);
  try {
    await pool(batches, p.concurrency, async (b) => {
      const first = p.from + b * p.batch;
      const n = Math.min(p.batch, p.from + p.count - first);
      const tasks = Array.from({ length: n }, (_, k) => ({
        taskId: `${p.idPrefix}${first + k}`,
        resource: `${p.resourcePrefix}${first + k}`,
        payload: payloadOf(first + k, p.payloadBytes),
        ...(p.priority === undefined ? {} : { priority: p.priority }),
      }));
      for (let attempt = 0; ; attempt += 1) {
        try {
          requests += 1;
          const notAccepted = await admin.submitBatch(tasks);
          refused += notAccepted;
          counters.errors += notAccepted;
          counters.ops += n - notAccepted;
          const second = Math.floor((performance.now() - t0) / 1000);
          while (slices.length <= second) slices.push(0);
          slices[second] = (slices[second] ?? 0) + n - notAccepted;
          return;
        } catch (err) {
          firstError ||= String(err).slice(0, 300);
          if (attempt >= 4) {
            counters.errors += n;
            return;
          }
          retries += 1;
          await sleep(200 * 2 ** attempt);
        }
      }
    });
  } finally {
    await admin.close();
  }
  return performance.now() - t0;
}

serve<Params>({
  start(p) {
    counters.ops = 0;
    counters.errors = 0;
    run = submitAll(p);
    // Reported by `stop`; a rejection here would otherwise be unhandled until then.
    run.catch(() => undefined);
    return Promise.resolve();
  },
  sample() {
    return counters;
  },
  async stop() {
    const elapsedMs = await (run ?? Promise.resolve(0));
    return { elapsedMs, requests, retries, refused, firstError, slices };
  },
});
