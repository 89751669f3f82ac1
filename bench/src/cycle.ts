/**
 * Suite `cycle`: full task cycles/s — submit (admin HTTP, `POST /v1/tasks/batch`) → grant → fenced write at the sink →
 * complete — with 8 worker SDK instances (`startWorker`, 8 slots each, in the bench process) on the
 * built coordinator and sink. The bench keeps a bounded backlog of submitted, uncompleted tasks
 * (each on its own resource; 4 submitters, batches of up to 32) and counts `completed` events.
 * The SDK workers long-poll their acquires (`waitMs`).
 * Baseline, interleaved: raw etcd create-if-absent txns/s at the same 64-way concurrency, ÷ 3
 * (a cycle needs at least three etcd writes: submit, grant, complete). Target >= 1.0x.
 */
import { startWorker, type Worker } from '@leasehold/worker';
import { EtcdBaselines, type LoopResult } from './etcd-baselines.js';
import { compactEtcd, type Etcd } from './infra/etcd.js';
import { Admin } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { CpuPerOp } from './infra/proc.js';
import { interleave, mean, ratioRow, type BenchRow } from './report.js';

export interface CycleOptions {
  readonly etcd: Etcd;
  readonly seconds: number;
  readonly rounds: number;
  readonly workers?: number;
  readonly slots?: number;
  readonly log: (line: string) => void;
}

const SUBMITTERS = 4;
const SUBMIT_BATCH = 32;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runCycleBench(o: CycleOptions): Promise<BenchRow[]> {
  const workerCount = o.workers ?? 8;
  const slots = o.slots ?? 8;
  const stack = await startStack({ name: 'cycle', etcd: o.etcd, sessionTtlMs: 10_000, heartbeatIntervalMs: 2_500 });
  // Outside the coordinator's prefix: its watch covers the whole prefix, and the baseline's tens of
  // thousands of writes inside it used to flood that watch (the index then lagged by seconds).
  const baselines = new EtcdBaselines(o.etcd.endpoint, `${stack.prefix.slice(0, -1)}-baseline/`);
  const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
  let taskSeq = 0;
  try {
    const cycleRound = async (round: number): Promise<LoopResult> => {
      let completed = 0;
      let submitted = 0;
      let counting = false;
      let errors = 0;
      const workers: Worker[] = [];
      for (let i = 0; i < workerCount; i += 1) {
        const w = startWorker({
          coordinators: [stack.coordinator.url],
          sink: { url: stack.sink.url },
          credentials: { workerKey: stack.keys.workerKey },
          workerId: `cycle-${round}-${i}`,
          concurrency: slots,
          idleBackoffMs: 20,
          handler: (task) => ({ done: task.taskId }),
        });
        w.on('*', (e) => {
          if (e.type === 'completed' && counting) completed += 1;
          if ((e.type === 'refused' || e.type === 'lease-lost') && counting) errors += 1;
        });
        workers.push(w);
      }
      const backlog = workerCount * slots * 2;
      const start = performance.now();
      const measureFrom = start + 1_000;
      const end = measureFrom + o.seconds * 1_000;
      let done = 0;
      const submitter = async () => {
        while (performance.now() < end) {
          const room = Math.min(SUBMIT_BATCH, backlog - (submitted - done));
          if (room < Math.min(8, SUBMIT_BATCH)) {
            await sleep(1);
            continue;
          }
          submitted += room;
          const batch = Array.from({ length: room }, () => {
            const n = taskSeq++;
            return { taskId: `c${n}`, resource: `cr/${n}` };
          });
          try {
            errors += await admin.submitBatch(batch);
          } catch {
            errors += room;
          }
        }
      };
      for (const w of workers) w.on('completed', () => (done += 1));
      const timer = setTimeout(() => (counting = true), measureFrom - start);
      await Promise.all(Array.from({ length: SUBMITTERS }, submitter));
      clearTimeout(timer);
      counting = false;
      await Promise.all(workers.map((w) => w.close(2_000)));
      return { ops: completed, errors, seconds: o.seconds, perSecond: completed / o.seconds };
    };
    const perOp = { cycle: new CpuPerOp(), rawTxn: new CpuPerOp() };
    const pids = { etcd: o.etcd.pid, coordinator: stack.coordinator.pid, sink: stack.sink.pid };
    const results = await interleave(
      o.rounds,
      {
        cycle: (round) => perOp.cycle.measure(pids, () => cycleRound(round)),
        rawTxn: () =>
          perOp.rawTxn.measure({ etcd: o.etcd.pid }, () => baselines.rawTxn(workerCount * slots, o.seconds)),
      },
      o.log,
      () => compactEtcd(o.etcd),
    );
    const cycles = mean(results.cycle.map((r) => r.perSecond));
    const raw = mean(results.rawTxn.map((r) => r.perSecond));
    return [
      ratioRow({
        name: `full task cycles/s (submit → grant → write → complete), ${workerCount} SDK workers × ${slots} slots`,
        value: cycles,
        unit: 'cycles/s',
        baseline: raw / 3,
        baselineName: `raw etcd3 txn/s ÷ 3, ${workerCount * slots} in flight`,
        target: 1.0,
        note:
          `refused or lost during measurement: ${results.cycle.reduce((a, r) => a + r.errors, 0)}; ` +
          `CPU µs per cycle (SDK workers and submitters are the clients; worker start/stop included): ` +
          `${perOp.cycle.describe()}; per raw txn: ${perOp.rawTxn.describe()}`,
      }),
    ];
  } finally {
    baselines.close();
    await stack.stop();
  }
}
