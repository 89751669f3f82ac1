/**
 * Suite `grants`: grants at 64 concurrent acquirers (4 processes × 16 sessions) on the built
 * coordinator and sink, vs the etcd work a grant stands on, driven from its own process.
 *
 * A grant counts when `lease.granted` arrives: after the owner txn in etcd and the sink's durable
 * fence advance. Sides, interleaved round by round (etcd compacted between rounds):
 *   - `grants`: acquire → granted, each acquirer keeping what it got (from a pool of pending tasks
 *     on distinct resources; everything is released after the round, outside the window);
 *   - `grant+release`: acquire → granted → release → released;
 *   - `rawTxn`: a create-if-absent txn with a lease on a fresh key, 64 in flight (keeps its keys);
 *   - `lock`: etcd3's Lock acquire + release of a fresh key, 64 in flight.
 * CPU per op: a grant is charged coordinator + etcd + sink; a raw txn etcd + its client process
 * (target: grant ≤ 0.6× raw txn — batching must pay); the acquirer processes are reported apart.
 */
import { ChildLoad } from './child-load.js';
import { compactEtcd, type Etcd } from './infra/etcd.js';
import { waitIdle } from './infra/proc.js';
import { Admin, pool } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { interleaveLoads, median, type RoundResult } from './measure.js';
import { cpuRow, limitRow, percentile, throughputRow, type BenchRow } from './report.js';

export interface GrantsOptions {
  readonly etcd: Etcd;
  readonly seconds: number;
  readonly rounds: number;
  readonly maxWarmupSlices: number;
  readonly log: (line: string) => void;
}

const PROCESSES = 4;
const SESSIONS = 16;

export async function runGrantsBench(o: GrantsOptions): Promise<BenchRow[]> {
  const lanes = PROCESSES * SESSIONS;
  const stack = await startStack({ name: 'grants', etcd: o.etcd, sessionTtlMs: 10_000, heartbeatIntervalMs: 2_500 });
  // Outside the coordinator's prefix: its watch covers the whole prefix.
  const basePrefix = `${stack.prefix.slice(0, -1)}-baseline/`;
  const loads: ChildLoad[] = [];
  try {
    const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
    // Enough pending tasks for the held side at up to ~6k grants/s over warm-up + window.
    const warm = Math.min(4, o.maxWarmupSlices);
    const poolSize = Math.ceil((6_000 * (warm + o.seconds + 1)) / 1000) * 1000;
    const tasks = Array.from({ length: poolSize }, (_, i) => ({ taskId: `t${i}`, resource: `r/${i}` }));
    await pool(Math.ceil(tasks.length / 1000), 4, async (i) => {
      const refused = await admin.submitBatch(tasks.slice(i * 1000, (i + 1) * 1000));
      if (refused > 0) throw new Error(`${refused} tasks refused`);
    });
    await admin.close();
    // The coordinator indexes the pool from its watch: let it finish before anything is measured.
    await waitIdle(stack.coordinator.pid);
    const servers = { coordinator: stack.coordinator.pid, etcd: o.etcd.pid, sink: stack.sink.pid };
    const acquirers = (name: string, mode: 'held' | 'cycle') =>
      new ChildLoad({
        name,
        script: 'acquirers.js',
        count: PROCESSES,
        counted: () => servers,
        params: (round, i) => ({
          url: stack.coordinator.url,
          workerKey: stack.keys.workerKey,
          sessions: SESSIONS,
          mode,
          tag: `${name}-${round}-${i}`,
        }),
      });
    const etcdLoad = (name: string, mode: 'rawTxn' | 'lock') =>
      new ChildLoad({
        name,
        script: 'etcd-load.js',
        count: 1,
        counted: (children) => ({ etcd: o.etcd.pid, client: children[0]?.pid ?? 0 }),
        params: (round) => ({ endpoint: o.etcd.endpoint, prefix: basePrefix, lanes, mode, tag: `${name}-${round}` }),
      });
    const held = acquirers('grants', 'held');
    const cycle = acquirers('grant-release', 'cycle');
    const raw = etcdLoad('rawTxn', 'rawTxn');
    const lock = etcdLoad('lock', 'lock');
    loads.push(held, cycle, raw, lock);
    const results = await interleaveLoads(
      o.rounds,
      loads,
      { seconds: o.seconds, maxWarmupSlices: warm, log: o.log },
      () => compactEtcd(o.etcd),
    );
    const get = (name: string): RoundResult[] => results.get(name) ?? [];
    const latencies = held.summaries
      .flat()
      .flatMap((s) => (Array.isArray(s.latencies) ? (s.latencies as number[]) : []))
      .sort((a, b) => a - b);
    const none = [...held.summaries, ...cycle.summaries].flat().reduce((a, s) => a + Number(s.none ?? 0), 0);
    const acq = (rs: readonly RoundResult[]) => Math.round(median(rs.map((r) => r.clientUs)));
    const per = (rs: readonly RoundResult[], k: string) => Math.round(median(rs.map((r) => r.cpuUs[k] ?? 0)));
    const note =
      `${lanes} acquirers in ${PROCESSES} processes, each keeping its grants; pool ${poolSize} tasks; lease.none ${none}; ` +
      `CPU µs per grant (medians): coordinator ${per(get('grants'), 'coordinator')}, etcd ${per(get('grants'), 'etcd')}, ` +
      `sink ${per(get('grants'), 'sink')}, acquirer processes ${acq(get('grants'))}; per raw txn: etcd ${per(get('rawTxn'), 'etcd')}, ` +
      `client ${per(get('rawTxn'), 'client')}`;
    return [
      throughputRow({
        name: `grants/s (acquire → fence advanced → granted), ${lanes} acquirers`,
        unit: 'grants/s',
        figure: get('grants'),
        base: get('rawTxn'),
        baselineName: `raw etcd3 create-if-absent txn + lease, ${lanes} in flight, own process`,
        cpu: 'counted',
        note,
      }),
      cpuRow({
        name: 'grants: CPU per grant (coordinator + etcd + sink) vs raw txn (etcd + client)',
        figure: get('grants'),
        base: get('rawTxn'),
        figureCpu: (r) => r.countedUs,
        baseCpu: (r) => r.countedUs,
        baselineName: 'raw etcd3 create-if-absent txn',
        target: 0.6,
      }),
      throughputRow({
        name: `grant + release cycles/s (acquire → granted → release → released), ${lanes} acquirers`,
        unit: 'cycles/s',
        figure: get('grant-release'),
        base: get('lock'),
        baselineName: `etcd3 Lock acquire+release, fresh key, ${lanes} in flight, own process`,
        cpu: 'counted',
        note: `CPU per op: coordinator + etcd + sink vs etcd + Lock client; acquirer processes ${acq(get('grant-release'))} µs per cycle`,
      }),
      limitRow({
        name: `grant latency p99 (acquire → granted), ${lanes} acquirers`,
        value: percentile(latencies, 99),
        unit: 'ms',
        baseline: percentile(latencies, 50),
        baselineName: 'p50 of the same',
        note: `p999 ${percentile(latencies, 99.9).toFixed(1)} ms over ${latencies.length} samples`,
      }),
    ];
  } finally {
    for (const l of loads) await l.close();
    await stack.stop();
  }
}
