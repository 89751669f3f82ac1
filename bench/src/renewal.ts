/**
 * Suite `renewal` (and memory): what keeping leases alive costs.
 *
 * The built coordinator (session TTL 3 s, heartbeat every 1 s) with 100 raw WebSocket sessions.
 * Window A: the 100 sessions hold nothing and only heartbeat. Then each session acquires 100 tasks
 * (10 000 held resources) and window B measures again while only heartbeats flow. CPU is read from
 * /proc/<pid>/stat (utime + stime) of the coordinator and of etcd; A is B's baseline: renewal is
 * per session (one heartbeat, one etcd lease keepalive), so B/A near 1.0 means holding 100x more
 * resources costs nothing extra. Memory: coordinator VmRSS with 10 000 held resources vs the same
 * coordinator before any session was opened.
 */
import type { Etcd } from './infra/etcd.js';
import { cpuMs, rssBytes } from './infra/proc.js';
import { Admin, isGrant, pool, RawWorker } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { limitRow, round, type BenchRow } from './report.js';

export interface RenewalOptions {
  readonly etcd: Etcd;
  readonly sessions: number;
  readonly perSession: number;
  readonly seconds: number;
  readonly log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function cpuWindow(pids: readonly number[], seconds: number): Promise<number[]> {
  const before = pids.map((p) => cpuMs(p) ?? 0);
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const elapsed = (performance.now() - t0) / 1000;
  return pids.map((p, i) => ((cpuMs(p) ?? 0) - (before[i] ?? 0)) / elapsed);
}

export async function runRenewalBench(o: RenewalOptions): Promise<BenchRow[]> {
  const stack = await startStack({ name: 'renewal', etcd: o.etcd, sessionTtlMs: 3_000, heartbeatIntervalMs: 1_000 });
  const workers: RawWorker[] = [];
  const held = o.sessions * o.perSession;
  try {
    await sleep(1_000);
    const idleRss = rssBytes(stack.coordinator.pid) ?? 0;
    const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
    const t0 = performance.now();
    await admin.submitAll(
      Array.from({ length: held }, (_, i) => ({ taskId: `h${i}`, resource: `hr/${i}` })),
      32,
    );
    o.log(`renewal: submitted ${held} tasks in ${Math.round(performance.now() - t0)} ms`);
    for (let i = 0; i < o.sessions; i += 1) {
      const w = await RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `renew-${i}`, o.perSession);
      workers.push(w);
    }
    // Spread the heartbeats over the interval, as independent workers would be.
    workers.forEach((w, i) => {
      setTimeout(
        () => {
          w.startHeartbeats(1_000);
        },
        (1_000 * i) / workers.length,
      ).unref();
    });
    await sleep(1_500);
    const pids = [stack.coordinator.pid, o.etcd.pid];
    const [coordIdle = 0, etcdIdle = 0] = await cpuWindow(pids, o.seconds);
    const t1 = performance.now();
    let granted = 0;
    await pool(workers.length * 4, workers.length * 4, async (lane) => {
      const w = workers[lane % workers.length];
      if (w === undefined) return;
      for (let k = 0; k < o.perSession / 4 && performance.now() - t1 < 120_000;) {
        const reply = await w.acquire(`a${lane}-${k}-${granted}`);
        if (isGrant(reply)) {
          granted += 1;
          k += 1;
        } else await sleep(5);
      }
    });
    o.log(`renewal: ${granted} resources held after ${Math.round(performance.now() - t1)} ms`);
    await sleep(2_000);
    const [coordHeld = 0, etcdHeld = 0] = await cpuWindow(pids, o.seconds);
    const heldRss = rssBytes(stack.coordinator.pid) ?? 0;
    const etcdRss = rssBytes(o.etcd.pid) ?? 0;
    const mib = (b: number) => b / 1024 / 1024;
    const setup = `${o.sessions} sessions, heartbeat 1 s, TTL 3 s, ${o.seconds} s windows`;
    return [
      limitRow({
        name: `renewal: coordinator CPU, ${o.sessions} sessions × ${o.perSession} held (${granted} held)`,
        value: coordHeld,
        unit: 'ms CPU/s',
        baseline: coordIdle,
        baselineName: `same ${o.sessions} sessions holding nothing`,
        note: setup,
      }),
      limitRow({
        name: `renewal: etcd CPU, ${o.sessions} sessions × ${o.perSession} held`,
        value: etcdHeld,
        unit: 'ms CPU/s',
        baseline: etcdIdle,
        baselineName: `same ${o.sessions} sessions holding nothing`,
      }),
      limitRow({
        name: `memory: coordinator RSS with ${granted} held resources`,
        value: mib(heldRss),
        unit: 'MiB',
        baseline: mib(idleRss),
        baselineName: 'same coordinator before any session',
        note: `etcd RSS at that point ${round(mib(etcdRss), 1)} MiB`,
      }),
    ];
  } finally {
    for (const w of workers) w.close();
    await stack.stop();
  }
}
