/**
 * Child process: `sessions` raw WebSocket workers (one coordinator session each, opened on the
 * first start and kept), each running one acquire loop:
 *   - `held`:  lease.acquire → lease.granted, keep the grant (op = a grant); on stop every grant is
 *              released again, after the measured window;
 *   - `cycle`: lease.acquire → lease.granted → lease.release → lease.released (op = a release).
 * A `lease.none` is counted and backed off 2 ms. Latency acquire → granted is recorded inside the
 * measured window (every 4th).
 */
import { isGrant, RawWorker, type GrantFrame } from '../infra/raw-worker.js';
import { serve, type Counters } from './protocol.js';

interface Params {
  readonly url: string;
  readonly workerKey: string;
  readonly sessions: number;
  readonly mode: 'held' | 'cycle';
  readonly tag: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const workers: RawWorker[] = [];
const counters: Counters = { ops: 0, errors: 0 };
let none = 0;
let firstError = '';
let running = false;
let recording = false;
let lanes: Promise<void>[] = [];
let held: GrantFrame[][] = [];
let latencies: number[] = [];

async function lane(w: RawWorker, i: number, p: Params): Promise<void> {
  for (let n = 0; running; n += 1) {
    try {
      const sentAt = performance.now();
      const reply = await w.acquire(`${p.tag}-${i}-${n}`);
      if (!isGrant(reply)) {
        if (reply.type === 'lease.none') {
          none += 1;
          await sleep(2);
        } else {
          counters.errors += 1;
          firstError ||= JSON.stringify(reply).slice(0, 300);
        }
        continue;
      }
      if (recording && (n & 3) === 0) latencies.push(performance.now() - sentAt);
      if (p.mode === 'held') {
        held[i]?.push(reply);
        counters.ops += 1;
      } else {
        const r = await w.release(reply);
        if (r.type === 'lease.released') counters.ops += 1;
        else {
          counters.errors += 1;
          firstError ||= JSON.stringify(r).slice(0, 300);
        }
      }
    } catch (err) {
      counters.errors += 1;
      firstError ||= String(err).slice(0, 300);
    }
  }
}

serve<Params>({
  async start(p) {
    while (workers.length < p.sessions) {
      const w = await RawWorker.open(p.url, p.workerKey, `acq-${process.pid}-${workers.length}`, 10_000);
      w.startHeartbeats(2_000);
      workers.push(w);
    }
    counters.ops = 0;
    counters.errors = 0;
    none = 0;
    latencies = [];
    held = workers.map(() => []);
    running = true;
    lanes = workers.map((w, i) => lane(w, i, p));
  },
  sample(mark) {
    if (mark === 'begin') recording = true;
    if (mark === 'end') recording = false;
    return counters;
  },
  async stop() {
    running = false;
    await Promise.all(lanes);
    // Give everything back for the next rounds (outside the measured window).
    await Promise.all(
      workers.map(async (w, i) => {
        for (const g of held[i] ?? []) {
          const r = await w.release(g);
          if (r.type !== 'lease.released') throw new Error(`release after the round: ${r.type}`);
        }
      }),
    );
    return { none, firstError, latencies: latencies.map((x) => Math.round(x * 100) / 100) };
  },
});
