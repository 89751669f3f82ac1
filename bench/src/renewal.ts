/**
 * Suite `renewal` (and memory): does keeping leases cost anything per held resource?
 *
 * The built coordinator (session TTL 3 s, heartbeat every 1 s) with 100 raw WebSocket sessions
 * heartbeating, spread over the interval. Holders hold L resources in all, filled one session at a
 * time up to the protocol's 10,000 per session (`capacity` ≤ 10k: 1k and 10k sit in one session,
 * 50k in five); the other sessions hold nothing. L walks the levels up and back down (e.g. 0, 1k, 10k, 50k, 10k, 1k, 0: A-B-A
 * windows at every step, so a drift over time shows as a gap between the up and down windows
 * instead of as a slope). Pending tasks stay constant: going up, the bench submits as many new
 * tasks as the holder then acquires; going down, the holder completes tasks (a release would give
 * them back to pending). Between steps the coordinator settles; then one window measures only
 * heartbeats: CPU of the coordinator and of etcd from /proc (ms of CPU per wall second) and RSS.
 * A least-squares line of CPU against L gives the slope per 10k held with its standard error;
 * target: coordinator slope ≤ 2 ms CPU/s per 10k held (≤ 1 % of a core at 50k).
 */
import { compactEtcd, etcdState, type Etcd } from './infra/etcd.js';
import { cpuMs, rssBytes, waitIdle } from './infra/proc.js';
import { Admin, isGrant, pool, RawWorker, type GrantFrame } from './infra/raw-worker.js';
import { startStack } from './infra/stack.js';
import { fitLine } from './measure.js';
import { limitRow, round, type BenchRow } from './report.js';

export interface RenewalOptions {
  readonly etcd: Etcd;
  readonly levels: readonly number[];
  readonly windowSeconds: number;
  readonly log: (line: string) => void;
}

const SESSIONS = 100;
const PER_SESSION_MAX = 10_000;
const PENDING = 1_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Window {
  readonly held: number;
  readonly coordinator: number;
  readonly etcd: number;
  readonly coordinatorRss: number;
  readonly etcdRss: number;
  readonly etcdDbMiB: number;
  readonly etcdKeys: number;
}

export async function runRenewalBench(o: RenewalOptions): Promise<BenchRow[]> {
  const stack = await startStack({ name: 'renewal', etcd: o.etcd, sessionTtlMs: 3_000, heartbeatIntervalMs: 1_000 });
  const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
  const workers: RawWorker[] = [];
  const held: { holder: RawWorker; grant: GrantFrame }[] = [];
  let submitted = 0;
  let seq = 0;
  const submit = async (n: number) => {
    const ids = Array.from({ length: n }, () => submitted++);
    await pool(Math.ceil(ids.length / 1000), 4, async (i) => {
      const chunk = ids.slice(i * 1000, (i + 1) * 1000).map((k) => ({ taskId: `h${k}`, resource: `hr/${k}` }));
      const refused = await admin.submitBatch(chunk);
      if (refused > 0) throw new Error(`${refused} tasks refused`);
    });
  };
  try {
    await sleep(1_000);
    const idleRss = rssBytes(stack.coordinator.pid) ?? 0;
    await submit(PENDING);
    const max = Math.max(...o.levels);
    const holderCount = Math.ceil(max / PER_SESSION_MAX);
    for (let i = 0; i < SESSIONS; i += 1) {
      const capacity = i < holderCount ? PER_SESSION_MAX : 1;
      workers.push(await RawWorker.open(stack.coordinator.url, stack.keys.workerKey, `renew-${i}`, capacity));
    }
    workers.forEach((w, i) => {
      setTimeout(
        () => {
          w.startHeartbeats(1_000);
        },
        (1_000 * i) / SESSIONS,
      ).unref();
    });
    const holders = workers.slice(0, holderCount);
    const counts = holders.map(() => 0);
    const moveTo = async (level: number) => {
      const t0 = performance.now();
      if (level > held.length) {
        const delta = level - held.length;
        await submit(delta);
        await waitIdle(stack.coordinator.pid);
        let want = delta;
        await pool(64, 64, async () => {
          while (want > 0 && performance.now() - t0 < 180_000) {
            const at = counts.findIndex((c) => c < PER_SESSION_MAX);
            const holder = holders[at];
            if (holder === undefined) break;
            want -= 1;
            counts[at] = (counts[at] ?? 0) + 1;
            const reply = await holder.acquire(`a${seq++}`);
            if (isGrant(reply)) held.push({ holder, grant: reply });
            else {
              want += 1;
              counts[at] = (counts[at] ?? 0) - 1;
              await sleep(5);
            }
          }
        });
      } else {
        const drop = held.splice(level);
        await pool(drop.length, 64, async (i) => {
          const h = drop[i];
          if (h === undefined) return;
          const at = holders.indexOf(h.holder);
          counts[at] = (counts[at] ?? 0) - 1;
          const r = await h.holder.complete(h.grant, `done-${h.grant.token}`);
          if (r.type !== 'task.completed') throw new Error(`complete answered ${r.type}`);
        });
      }
      o.log(`renewal: ${held.length} held after ${Math.round(performance.now() - t0)} ms`);
    };
    // A first window at 0 held is discarded: right after the pending tasks were submitted and the
    // sessions opened, the coordinator is still settling (JIT, GC; measured 60 ms/s falling to 12).
    const sequence = [0, ...o.levels, ...[...o.levels].reverse().slice(1)];
    const windows: Window[] = [];
    for (const [step, level] of sequence.entries()) {
      await moveTo(level);
      // Compacted before every window, as production etcd auto-compacts: without it the history of
      // the walk (every grant and complete) stays in etcd and its CPU rises with elapsed work, not
      // with what is held (measured: 28 ms/s at the first 0-held window, 36 at the last).
      await compactEtcd(o.etcd);
      await waitIdle(stack.coordinator.pid);
      await sleep(1_500);
      const state = await etcdState(o.etcd);
      const pids = [stack.coordinator.pid, o.etcd.pid];
      const before = pids.map((p) => cpuMs(p) ?? 0);
      const t0 = performance.now();
      await sleep(o.windowSeconds * 1000);
      const s = (performance.now() - t0) / 1000;
      const [c = 0, e = 0] = pids.map((p, i) => ((cpuMs(p) ?? 0) - (before[i] ?? 0)) / s);
      const w: Window = {
        held: held.length,
        coordinator: c,
        etcd: e,
        coordinatorRss: rssBytes(stack.coordinator.pid) ?? 0,
        etcdRss: rssBytes(o.etcd.pid) ?? 0,
        etcdDbMiB: state.dbMiB,
        etcdKeys: state.keys,
      };
      if (step > 0) windows.push(w);
      o.log(
        `renewal window${step === 0 ? ' (discarded)' : ''}: ${w.held} held, coordinator ${c.toFixed(1)} ms/s, etcd ${e.toFixed(1)} ms/s` +
          ` (etcd: ${w.etcdKeys} keys, db ${w.etcdDbMiB} MiB, revision ${state.revision})`,
      );
    }
    const xs = windows.map((w) => w.held / 10_000);
    const fitC = fitLine(
      xs,
      windows.map((w) => w.coordinator),
    );
    const fitE = fitLine(
      xs,
      windows.map((w) => w.etcd),
    );
    const list = (k: 'coordinator' | 'etcd') => windows.map((w) => `${w.held}: ${w[k].toFixed(1)}`).join(', ');
    const mib = (b: number) => b / 1024 / 1024;
    const top = windows.find((w) => w.held === max) ?? windows[0];
    const zero = windows.at(-1);
    const setup = `${SESSIONS} sessions (${holderCount} holding, ≤ ${PER_SESSION_MAX} each), heartbeat 1 s, TTL 3 s, ${PENDING} pending tasks throughout, ${o.windowSeconds} s windows`;
    return [
      limitRow({
        name: `renewal: coordinator CPU slope vs held resources (0–${max / 1000}k held)`,
        value: fitC.slope,
        unit: 'ms CPU/s per 10k held',
        limit: 2,
        baseline: fitC.intercept,
        baselineName: 'fitted CPU at 0 held (ms/s)',
        digits: 2,
        note: `${setup}; slope ${fitC.slope.toFixed(2)} ± ${fitC.slopeSe.toFixed(2)} (standard error) ms/s per 10k; windows (held: ms CPU/s): ${list('coordinator')}`,
      }),
      limitRow({
        name: 'renewal: etcd CPU slope vs held resources',
        value: fitE.slope,
        unit: 'ms CPU/s per 10k held',
        baseline: fitE.intercept,
        baselineName: 'fitted CPU at 0 held (ms/s)',
        digits: 2,
        note:
          `slope ${fitE.slope.toFixed(2)} ± ${fitE.slopeSe.toFixed(2)} ms/s per 10k; windows: ${list('etcd')}; ` +
          `etcd compacted before each window; live keys / db MiB per window: ${windows.map((w) => `${w.etcdKeys} / ${w.etcdDbMiB}`).join(', ')}`,
      }),
      limitRow({
        name: `memory: coordinator RSS with ${top?.held ?? 0} held resources`,
        value: mib(top?.coordinatorRss ?? 0),
        unit: 'MiB',
        baseline: mib(idleRss),
        baselineName: 'same coordinator before any session',
        note: `at 0 held after the walk ${round(mib(zero?.coordinatorRss ?? 0), 1)} MiB; etcd RSS at ${top?.held ?? 0} held ${round(mib(top?.etcdRss ?? 0), 1)} MiB`,
      }),
    ];
  } finally {
    for (const w of workers) w.close();
    await admin.close();
    await stack.stop();
  }
}
