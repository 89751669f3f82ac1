/**
 * Suite `grants`: grants/s at 64 concurrent acquirers.
 *
 * The built coordinator and sink as processes on the bench etcd; 64 raw WebSocket workers (one
 * session each). A grant counts when `lease.granted` arrives, i.e. after the owner txn and the
 * sink's durable fence advance. Two figures, each against the baseline that does the same work:
 *   - grants/s: each acquirer loops `lease.acquire` (any pending task) -> `lease.granted` and keeps
 *     what it got, from a pool of pending tasks on distinct resources large enough for the round
 *     (after the round everything is released, outside the measurement) — vs raw etcd3
 *     create-if-absent txns with a lease on fresh keys, which are never deleted either (target
 *     >= 1.0x: batching must win back the extra work);
 *   - grant + release cycles/s: each acquirer loops acquire -> granted -> `lease.release` ->
 *     released — vs etcd3's Lock acquire + release of a fresh key (target >= 3x).
 * Same 64-way concurrency, same etcd, interleaved round by round.
 */
import { cpuMs, CpuPerOp, waitIdle } from './infra/proc.js';
import { Admin, isGrant, pool, RawWorker, type GrantFrame } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { compactEtcd, type Etcd } from './infra/etcd.js';
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
    // Enough pending tasks for the held-grants side at up to ~7k grants/s over a round (warm-up
    // included); released again after each of its rounds. lease.none is counted if it runs dry.
    const poolSize = Math.ceil((7_000 * (o.seconds + 1)) / 1000) * 1000;
    const tasks = Array.from({ length: poolSize }, (_, i) => ({ taskId: `t${i}`, resource: `r/${i}` }));
    await pool(Math.ceil(tasks.length / 1000), 4, async (i) => {
      const refused = await admin.submitBatch(tasks.slice(i * 1000, (i + 1) * 1000));
      if (refused > 0) throw new Error(`${refused} tasks refused`);
    });
    // The coordinator indexes the pool from its watch: let it finish before anything is measured.
    await waitIdle(stack.coordinator.pid);
    for (let i = 0; i < lanes; i += 1) {
      const w = await RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `grant-${i}`, 10_000);
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
    /** One acquire; the grant, or undefined (a `lease.none` is counted and backed off). */
    const acquire = async (w: RawWorker, requestId: string): Promise<GrantFrame | undefined> => {
      const reply = await w.acquire(requestId);
      if (isGrant(reply)) return reply;
      if (reply.type === 'lease.none') {
        none += 1;
        await sleep(2);
      }
      return undefined;
    };
    const heldRound = async (round: number): Promise<LoopResult> => {
      const held: GrantFrame[][] = workers.map(() => []);
      const cpu0 = cpuMs(stack.coordinator.pid) ?? 0;
      const t0 = performance.now();
      const res = await runLanes(lanes, o.seconds, 1, async (lane, n) => {
        const w = workers[lane];
        if (w === undefined) return false;
        const sentAt = performance.now();
        const grant = await acquire(w, `h${round}-${n}`);
        if (grant === undefined) return false;
        held[lane]?.push(grant);
        if ((n & 3) === 0) latencies.push(performance.now() - sentAt);
        return true;
      });
      coordinatorCpu.push(((cpuMs(stack.coordinator.pid) ?? 0) - cpu0) / ((performance.now() - t0) / 1000));
      // Give everything back for the next rounds (not measured).
      await Promise.all(
        workers.map(async (w, lane) => {
          for (const g of held[lane] ?? []) {
            const r = await w.release(g);
            if (r.type !== 'lease.released') throw new Error(`release after the round: ${r.type}`);
          }
        }),
      );
      return res;
    };
    const cycleRound = (round: number): Promise<LoopResult> =>
      runLanes(lanes, o.seconds, 1, async (lane, n) => {
        const w = workers[lane];
        const grant = w === undefined ? undefined : await acquire(w, `g${round}-${n}`);
        if (w === undefined || grant === undefined) return false;
        return (await w.release(grant)).type === 'lease.released';
      });
    const results = await interleave(
      o.rounds,
      {
        grants: (round) => perOp.grants.measure(pids, () => heldRound(round)),
        cycles: cycleRound,
        rawTxn: () => perOp.rawTxn.measure({ etcd: o.etcd.pid }, () => baselines.rawTxn(lanes, o.seconds)),
        lock: () => baselines.lock(lanes, o.seconds),
      },
      o.log,
      () => compactEtcd(o.etcd),
    );
    const rate = (rs: readonly LoopResult[]) => mean(rs.map((r) => r.perSecond));
    const grants = rate(results.grants);
    const cycles = rate(results.cycles);
    latencies.sort((a, b) => a - b);
    const note =
      `${lanes} acquirers, each keeping its grants; pool ${poolSize} tasks; coordinator CPU ${Math.round(mean(coordinatorCpu))} ms/s; lease.none ${none}; ` +
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
        name: `grant + release cycles/s (acquire → granted → release → released), ${lanes} acquirers`,
        value: cycles,
        unit: 'cycles/s',
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
