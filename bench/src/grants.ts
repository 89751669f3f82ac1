/**
 * Suite `grants`: grants/s at 64 concurrent acquirers.
 *
 * Figure: the built coordinator and sink as processes on the bench etcd; 64 raw WebSocket workers
 * (one session each) loop `lease.acquire` (any pending task) -> `lease.granted` -> `lease.release`.
 * A grant counts when `lease.granted` arrives, i.e. after the owner txn and the sink's durable
 * fence advance. 4 tasks per acquirer on distinct resources keep free work in the pool.
 * Baselines, same 64-way concurrency, same etcd, interleaved round by round:
 *   raw etcd3 create-if-absent txns with a lease (target grants >= 1.0x: batching must win back
 *   the extra work), and etcd3's Lock acquire + release of a fresh key (target >= 3x).
 */
import { cpuMs, CpuPerOp } from './infra/proc.js';
import { Admin, isGrant, RawWorker } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import type { Etcd } from './infra/etcd.js';
import { EtcdBaselines, runLanes, type LoopResult } from './etcd-baselines.js';
import { interleave, mean, percentile, ratioRow, limitRow, type BenchRow } from './report.js';

export interface GrantsOptions {
  readonly etcd: Etcd;
  readonly seconds: number;
  readonly rounds: number;
  readonly concurrency?: number;
  readonly log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runGrantsBench(o: GrantsOptions): Promise<BenchRow[]> {
  const lanes = o.concurrency ?? 64;
  const stack = await startStack({ name: 'grants', etcd: o.etcd, sessionTtlMs: 10_000, heartbeatIntervalMs: 2_500 });
  // Outside the coordinator's prefix: its watch covers the whole prefix, and the baseline's tens of
  // thousands of writes inside it used to flood that watch (the index then lagged by seconds).
  const baselines = new EtcdBaselines(o.etcd.endpoint, `${stack.prefix.slice(0, -1)}-baseline/`);
  const workers: RawWorker[] = [];
  try {
    const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
    await admin.submitAll(Array.from({ length: lanes * 4 }, (_, i) => ({ taskId: `t${i}`, resource: `r/${i}` })));
    for (let i = 0; i < lanes; i += 1) {
      const w = await RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `grant-${i}`);
      w.startHeartbeats(2_000);
      workers.push(w);
    }
    const latencies: number[] = [];
    const coordinatorCpu: number[] = [];
    // CPU per operation of every process involved (contention on a shared machine changes the
    // rates, much less the CPU each operation costs): µs per grant / per raw txn.
    const perOp = { grants: new CpuPerOp(), rawTxn: new CpuPerOp() };
    const pids = { etcd: o.etcd.pid, coordinator: stack.coordinator.pid, sink: stack.sink.pid };
    let none = 0;
    const grantRound = async (round: number): Promise<LoopResult> => {
      const cpu0 = cpuMs(stack.coordinator.pid) ?? 0;
      const t0 = performance.now();
      const res = await runLanes(lanes, o.seconds, 1, async (lane, n) => {
        const w = workers[lane];
        if (w === undefined) return false;
        const sentAt = performance.now();
        const reply = await w.acquire(`g${round}-${n}`);
        if (!isGrant(reply)) {
          if (reply.type === 'lease.none') {
            none += 1;
            await sleep(2);
          }
          return false;
        }
        if ((n & 3) === 0) latencies.push(performance.now() - sentAt);
        const released = await w.release(reply);
        return released.type === 'lease.released';
      });
      coordinatorCpu.push(((cpuMs(stack.coordinator.pid) ?? 0) - cpu0) / ((performance.now() - t0) / 1000));
      return res;
    };
    const results = await interleave(
      o.rounds,
      {
        grants: (round) => perOp.grants.measure(pids, () => grantRound(round)),
        rawTxn: () => perOp.rawTxn.measure({ etcd: o.etcd.pid }, () => baselines.rawTxn(lanes, o.seconds)),
        lock: () => baselines.lock(lanes, o.seconds),
      },
      o.log,
    );
    const rate = (rs: readonly LoopResult[]) => mean(rs.map((r) => r.perSecond));
    const grants = rate(results.grants);
    latencies.sort((a, b) => a - b);
    const note =
      `${lanes} acquirers; coordinator CPU ${Math.round(mean(coordinatorCpu))} ms/s; lease.none ${none}; ` +
      `CPU µs per grant: ${perOp.grants.describe()}; per raw txn: ${perOp.rawTxn.describe()}`;
    return [
      ratioRow({
        name: `grants/s (acquire → fence advanced → granted), ${lanes} acquirers`,
        value: grants,
        unit: 'grants/s',
        baseline: rate(results.rawTxn),
        baselineName: `raw etcd3 create-if-absent txn + lease, ${lanes} in flight`,
        target: 1.0,
        note,
      }),
      ratioRow({
        name: `grants/s (acquire → fence advanced → granted), ${lanes} acquirers`,
        value: grants,
        unit: 'grants/s',
        baseline: rate(results.lock),
        baselineName: `etcd3 Lock acquire+release, fresh key, ${lanes} in flight`,
        target: 3.0,
      }),
      limitRow({
        name: `grant latency p99 (acquire → granted), ${lanes} acquirers`,
        value: percentile(latencies, 99),
        unit: 'ms',
        baseline: percentile(latencies, 50),
        baselineName: 'p50 of the same',
        digits: 1,
      }),
    ];
  } finally {
    for (const w of workers) w.close();
    baselines.close();
    await stack.stop();
  }
}
