/**
 * Suite `scale` (only with `--only scale`: it is long): what stored work costs as it grows.
 *
 * Two data sets, each on its own fresh etcd sized for it (`--quota-backend-bytes` 8 GiB, periodic
 * auto-compaction every 5 min, as a production etcd would run), with the built sink and coordinator:
 *   - **small**: `tasks` (default 1M) pending tasks of ~10 B payloads, each on its own resource,
 *     submitted through `POST /v1/tasks/batch` (1000 per request, 4 in flight) from a child process;
 *   - **large**: `largeTasks` (default 10k) pending tasks of `largeBytes` (64 KiB) payloads, as many
 *     per request as fit the default 1 MiB body limit.
 * For each: the submit rate (after a checked warm-up) with CPU µs per task; etcd's backend size per
 * task (`etcd_mvcc_db_total_size_in_bytes`), then again after a compaction + defrag (what is in
 * use); the coordinator's RSS per pending task (RSS of the coordinator restarted on the data and
 * ready, minus the RSS of the empty coordinator before the submit, divided by the tasks);
 * restart-to-ready (SIGKILL, start, until `/readyz` answers 200); list latency. The small set also
 * measures grant + release cycles/s at `tasks` pending against a second stack holding `lowLevel`
 * (1k) pending, in interleaved rounds (raw WebSocket acquirers, 4 processes × 16 sessions, as the
 * grants suite), then purge latency over `ended` completed tasks, then — when the coordinator has a
 * retention setting (its `--help`) — how long a completed task stays readable before retention
 * removes it. A step that fails (a restart that never becomes ready, a 503) is a row that says so:
 * that is the figure.
 *
 * Targets (issue 23): restart ≤ 30 s and RSS ≤ 1 KiB per task at 1M pending; grants at 1M pending
 * ≥ 0.8× the rate at 1k. The restart limit is also applied to the large set (the outage the issue
 * starts with).
 */
import { ChildLoad } from './child-load.js';
import { compactAndDefragEtcd, compactEtcd, etcdDbSize, startEtcd, type Etcd } from './infra/etcd.js';
import { DaemonStartError } from './infra/daemon.js';
import { rssBytes, waitIdle } from './infra/proc.js';
import { startStack, type Stack } from './infra/stack.js';
import { interleaveLoads, median, type RoundResult } from './measure.js';
import { limitRow, throughputRow, type BenchRow } from './report.js';
import {
  completeTasks,
  openTasksOf,
  probeList,
  probePurge,
  probeRetention,
  retentionOptions,
  submitFromChild,
  waitIndexed,
  type SubmitOutcome,
} from './scale-probes.js';

export interface ScaleOptions {
  readonly tasks: number;
  readonly largeTasks: number;
  readonly largeBytes: number;
  /** Tasks completed for the purge and retention figures. */
  readonly ended: number;
  readonly lowLevel: number;
  readonly restartTimeoutMs: number;
  readonly retentionTimeoutMs: number;
  /** Extra coordinator environment (e.g. a short retention age), for every coordinator of the suite. */
  readonly coordinatorEnv: Readonly<Record<string, string>>;
  readonly rounds: number;
  readonly seconds: number;
  readonly maxWarmupSlices: number;
  readonly log: (line: string) => void;
}

/** 8 GiB of quota and periodic auto-compaction: sized so the data sets fit with their history. */
export const SCALE_ETCD_ARGS = [
  '--quota-backend-bytes', String(8 * 1024 ** 3),
  '--auto-compaction-mode', 'periodic',
  '--auto-compaction-retention', '5m',
] as const; // prettier-ignore

const KIB = 1024;
const MIB = 1024 * 1024;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');
const sec = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** A row for a step that failed: value NaN (null in the JSON), the reason in the note. */
function failedRow(name: string, unit: string, why: string, limit?: number): BenchRow {
  return limitRow({ name, value: Number.NaN, unit, ...(limit === undefined ? {} : { limit }), note: `FAILED: ${why}` });
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

async function settledRss(pid: number): Promise<number> {
  await waitIdle(pid, 60_000);
  await sleep(2_000);
  return rssBytes(pid) ?? Number.NaN;
}

function submitRow(label: string, count: number, s: SubmitOutcome, bytesPerTask?: number): BenchRow {
  const mibs =
    bytesPerTask === undefined || bytesPerTask < KIB
      ? ''
      : `; ${((s.steady.rate * bytesPerTask) / MIB).toFixed(1)} MiB/s`;
  return limitRow({
    name: `scale: submit rate, ${label}`,
    value: s.steady.rate,
    unit: 'tasks/s',
    digits: 0,
    note:
      `${fmt(s.accepted)} of ${fmt(count)} accepted in ${sec(s.elapsedMs)} (${fmt((s.accepted * 1000) / Math.max(1, s.elapsedMs))}/s overall${mibs}); ` +
      `warm-up ${s.steady.steady ? `${s.steady.warmupSeconds} s` : 'NOT steady (whole-run rate)'}; ${s.requests} requests, ${s.retries} retried; ` +
      `CPU µs per task: coordinator ${Math.round(s.cpuUs.coordinator)}, etcd ${Math.round(s.cpuUs.etcd)}, submitter process ${Math.round(s.cpuUs.submitter)}` +
      (s.errors > 0 ? `; ${fmt(s.errors)} NOT accepted (first error: ${s.firstError})` : '') +
      (s.coordinatorExit === undefined ? '' : `; ${s.coordinatorExit}`),
  });
}

interface DataSet {
  readonly label: string;
  readonly count: number;
  readonly payloadBytes: number;
  readonly batch: number;
}

/** Submit a data set, then etcd size, list latency, restart-to-ready and RSS per task. */
async function measureDataSet(
  o: ScaleOptions,
  etcd: Etcd,
  stack: Stack,
  set: DataSet,
  rows: BenchRow[],
): Promise<{ restarted: boolean }> {
  const db0 = await etcdDbSize(etcd);
  // The empty figures come from a restarted process too, so both sides of "per task" are alike.
  const emptyReadyMs = (await stack.restartCoordinator(60_000)).readyAfterMs;
  const emptyRss = await settledRss(stack.coordinator.pid);
  o.log(
    `scale ${set.label}: empty coordinator ready ${sec(emptyReadyMs)} after start, RSS ${(emptyRss / MIB).toFixed(1)} MiB; submitting ${fmt(set.count)}`,
  );
  const s = await submitFromChild(
    stack,
    etcd.pid,
    {
      idPrefix: `${set.label}-`,
      resourcePrefix: `${set.label}/`,
      count: set.count,
      batch: set.batch,
      concurrency: 4,
      payloadBytes: set.payloadBytes,
    },
    o.log,
  );
  rows.push(
    submitRow(
      `${fmt(set.count)} × ${set.payloadBytes} B tasks (batches of ${set.batch})`,
      set.count,
      s,
      set.payloadBytes,
    ),
  );
  if (s.coordinatorExit !== undefined) throw new Error(s.coordinatorExit);
  const gauge = await waitIndexed(stack.coordinator.url, s.accepted, 600_000);
  if (gauge === undefined) await waitIdle(stack.coordinator.pid, 60_000);
  const submitRss = await settledRss(stack.coordinator.pid);
  const db1 = await etcdDbSize(etcd);
  const perTask = (b: number) => (b - db0.totalBytes) / Math.max(1, s.accepted);
  o.log(
    `scale ${set.label}: etcd db ${(db1.totalBytes / MIB).toFixed(1)} MiB (in use ${(db1.inUseBytes / MIB).toFixed(1)}), ${db1.keys} keys`,
  );

  const lists = [
    await probeList(stack.coordinator.url, stack.keys.adminKey, '/v1/tasks?limit=100', 5),
    await probeList(stack.coordinator.url, stack.keys.adminKey, '/v1/tasks?limit=1000', 3),
    await probeList(stack.coordinator.url, stack.keys.adminKey, '/v1/tasks?state=completed&limit=100', 3),
  ];
  const [first] = lists;
  const listNote = lists
    .map(
      (l) =>
        `${l.path}: median ${l.medianMs.toFixed(1)} ms, max ${l.maxMs.toFixed(1)} ms${l.failure === undefined ? '' : ` — ${l.failure}`}`,
    )
    .join('; ');
  rows.push(
    first?.failure === undefined
      ? limitRow({ name: `scale: list latency (GET /v1/tasks?limit=100) at ${fmt(s.accepted)} ${set.label}`, value: first?.medianMs ?? Number.NaN, unit: 'ms', note: listNote })
      : failedRow(`scale: list latency (GET /v1/tasks?limit=100) at ${fmt(s.accepted)} ${set.label}`, 'ms', listNote),
  ); // prettier-ignore

  let restarted = false;
  const restartName = `scale: restart-to-ready (SIGKILL → /readyz 200) at ${fmt(s.accepted)} ${set.label}`;
  try {
    const c = await stack.restartCoordinator(o.restartTimeoutMs);
    restarted = true;
    const g = await waitIndexed(c.url, s.accepted, 60_000).catch(() => undefined);
    rows.push(
      limitRow({
        name: restartName,
        value: c.readyAfterMs / 1000,
        unit: 's',
        limit: 30,
        baseline: emptyReadyMs / 1000,
        baselineName: 'restart-to-ready of the same coordinator with no tasks',
        digits: 2,
        note: `index after restart: ${g === undefined ? 'no task gauge' : `${fmt(openTasksOf(g))} open tasks`}`,
      }),
    );
  } catch (err) {
    const why =
      err instanceof DaemonStartError
        ? `not ready: ${err.message.split('\n')[0] ?? ''} (after ${sec(err.afterMs)})`
        : messageOf(err);
    o.log(`scale ${set.label}: restart FAILED: ${why}`);
    rows.push({ ...failedRow(restartName, 's', why, 30), clearsTarget: false, met: false });
  }
  const rssName = `scale: coordinator RSS per pending task (${fmt(s.accepted)} ${set.label}, restarted)`;
  if (restarted) {
    const rss = await settledRss(stack.coordinator.pid);
    rows.push(
      limitRow({
        name: rssName,
        value: (rss - emptyRss) / Math.max(1, s.accepted),
        unit: 'bytes/task',
        ...(set.label === 'small' ? { limit: KIB } : {}),
        digits: 0,
        note:
          `RSS ${(rss / MIB).toFixed(1)} MiB restarted on the data, ${(emptyRss / MIB).toFixed(1)} MiB empty; ` +
          `the coordinator that took the submits: ${(submitRss / MIB).toFixed(1)} MiB (${fmt((submitRss - emptyRss) / Math.max(1, s.accepted))} B/task)`,
      }),
    );
  } else {
    rows.push(
      failedRow(
        rssName,
        'bytes/task',
        `no restarted coordinator; the one that took the submits: ${(submitRss / MIB).toFixed(1)} MiB, ${fmt((submitRss - emptyRss) / Math.max(1, s.accepted))} B/task over ${(emptyRss / MIB).toFixed(1)} MiB empty`,
        set.label === 'small' ? KIB : undefined,
      ),
    );
  }

  await compactAndDefragEtcd(etcd);
  const db2 = await etcdDbSize(etcd);
  rows.push(
    limitRow({
      name: `scale: etcd db bytes per task (${fmt(s.accepted)} × ${set.payloadBytes} B payloads)`,
      value: perTask(db1.totalBytes),
      unit: 'bytes/task',
      digits: 0,
      note: `backend file ${(db1.totalBytes / MIB).toFixed(1)} MiB after the submit (${(db0.totalBytes / MIB).toFixed(2)} MiB before), ${fmt(db1.keys)} keys`,
    }),
    limitRow({
      name: `scale: etcd db bytes per task after compaction + defrag (in use, ${set.label})`,
      value: perTask(db2.totalBytes),
      unit: 'bytes/task',
      digits: 0,
      note: `backend file ${(db2.totalBytes / MIB).toFixed(1)} MiB after compact + defrag (in use ${(db2.inUseBytes / MIB).toFixed(1)} MiB)`,
    }),
  );
  return { restarted };
}

/** `coordinator 120, etcd 80, sink 30, acquirers 60` (µs per op, medians over rounds). */
function parts(rs: readonly RoundResult[]): string {
  const names = Object.keys(rs[0]?.cpuUs ?? {});
  const each = names.map((k) => `${k} ${Math.round(median(rs.map((r) => r.cpuUs[k] ?? 0)))}`);
  return [...each, `acquirers ${Math.round(median(rs.map((r) => r.clientUs)))}`].join(', ');
}

/** Grant + release cycles/s at the big backlog vs a second stack holding `lowLevel` pending. */
async function measureGrants(o: ScaleOptions, big: { etcd: Etcd; stack: Stack }, level: number): Promise<BenchRow> {
  const etcd = await startEtcd({ args: SCALE_ETCD_ARGS });
  const low = await startStack({
    name: 'scale-low',
    etcd,
    sessionTtlMs: 10_000,
    heartbeatIntervalMs: 2_500,
    coordinatorEnv: o.coordinatorEnv,
  });
  const loads: ChildLoad[] = [];
  try {
    const s = await submitFromChild(low, etcd.pid, { idPrefix: 'low-', resourcePrefix: 'low/', count: o.lowLevel, batch: 1000, concurrency: 4, payloadBytes: 10 }, o.log); // prettier-ignore
    if (s.accepted < o.lowLevel) throw new Error(`the ${o.lowLevel}-task stack accepted ${s.accepted}`);
    await waitIndexed(low.coordinator.url, s.accepted, 60_000);
    const acquirers = (name: string, stack: Stack, e: Etcd) =>
      new ChildLoad({
        name,
        script: 'acquirers.js',
        count: 4,
        counted: () => ({ coordinator: stack.coordinator.pid, etcd: e.pid, sink: stack.sink.pid }),
        params: (round, i) => ({ url: stack.coordinator.url, workerKey: stack.keys.workerKey, sessions: 16, mode: 'cycle', tag: `${name}-${round}-${i}` }),
      }); // prettier-ignore
    const high = acquirers('scale-high', big.stack, big.etcd);
    const base = acquirers('scale-low', low, etcd);
    loads.push(high, base);
    const results = await interleaveLoads(
      o.rounds,
      loads,
      { seconds: o.seconds, maxWarmupSlices: o.maxWarmupSlices, log: o.log },
      async () => {
        await compactEtcd(big.etcd);
        await compactEtcd(etcd);
      },
    );
    return throughputRow({
      name: `scale: grant + release cycles/s at ${fmt(level)} pending vs at ${fmt(o.lowLevel)} pending`,
      unit: 'cycles/s',
      figure: results.get('scale-high') ?? [],
      base: results.get('scale-low') ?? [],
      baselineName: `same load, a stack (own etcd, sink, coordinator) holding ${fmt(o.lowLevel)} pending`,
      cpu: 'counted',
      target: 0.8,
      note:
        `64 raw WebSocket acquirers (4 processes × 16 sessions), acquire → granted → release, so the backlog stays constant; ` +
        `CPU µs per cycle (medians): at ${fmt(level)} ${parts(results.get('scale-high') ?? [])}; at ${fmt(o.lowLevel)} ${parts(results.get('scale-low') ?? [])}`,
    });
  } finally {
    for (const l of loads) await l.close();
    await low.stop();
    await etcd.stop();
  }
}

/** Purge latency, then (when the coordinator has it) retention latency, over completed tasks. */
async function measureEndedWork(o: ScaleOptions, stack: Stack, pending: number, rows: BenchRow[]): Promise<void> {
  const url = stack.coordinator.url;
  const key = stack.keys.adminKey;
  const options = retentionOptions();
  const ended = await completeTasks(stack, o.ended);
  const p = await probePurge(url, key, ended.size, 300_000);
  const purgeName = `scale: purge ${fmt(ended.size)} completed tasks among ${fmt(pending)} pending (limit 1000 per call)`;
  const note = `${p.purged} purged in ${p.calls} calls, ${sec(p.totalMs)} in all; per call median ${p.medianCallMs.toFixed(0)} ms, max ${p.maxCallMs.toFixed(0)} ms`;
  // With retention on, "no more" early can mean retention removed the rest first: not a failure.
  const retentionTookSome = options.length > 0 && p.stopped?.startsWith('purge said no more') === true;
  rows.push(
    p.stopped === undefined || retentionTookSome
      ? limitRow({
          name: purgeName,
          value: p.totalMs / 1000,
          unit: 's',
          note: retentionTookSome
            ? `${note}; ${p.stopped ?? ''} (retention is on: it may have removed the rest first)`
            : note,
        })
      : failedRow(purgeName, 's', `${p.stopped ?? ''}; ${note}`),
  );

  const retentionName = 'scale: retention — completion → task removed (GET /v1/tasks/<id> 404), max over a sample';
  if (options.length === 0) {
    rows.push(
      limitRow({
        name: retentionName,
        value: Number.NaN,
        unit: 's',
        note: 'not supported: the coordinator has no retention setting (nothing in its --help)',
      }),
    );
    return;
  }
  const completed = await completeTasks(stack, o.ended);
  const r = await probeRetention(url, key, completed, 100, o.retentionTimeoutMs);
  const rnote =
    `${r.removed} of ${r.sampled} sampled tasks removed within ${sec(r.waitedMs)}; median ${sec(r.medianMs)}; ` +
    `coordinator retention settings: ${options.join(' | ').slice(0, 400)}` +
    (Object.keys(o.coordinatorEnv).length === 0 ? ' (defaults)' : `; set here: ${Object.entries(o.coordinatorEnv).map(([k, v]) => `${k}=${v}`).join(' ')}`); // prettier-ignore
  rows.push(
    r.removed === r.sampled
      ? limitRow({ name: retentionName, value: r.maxMs / 1000, unit: 's', note: rnote })
      : failedRow(
          retentionName,
          's',
          `not every sampled task was removed within ${sec(o.retentionTimeoutMs)} (a longer retention age? --scale-coordinator-env sets it); ${rnote}`,
        ),
  );
}

export async function runScaleBench(o: ScaleOptions): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const step = async (what: string, run: () => Promise<void>) => {
    try {
      await run();
    } catch (err) {
      o.log(`scale: ${what} FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      rows.push(failedRow(`scale: ${what}`, '', messageOf(err)));
    }
  };
  const stackOf = (name: string, etcd: Etcd) =>
    startStack({ name, etcd, sessionTtlMs: 10_000, heartbeatIntervalMs: 2_500, coordinatorEnv: o.coordinatorEnv, startTimeoutMs: 60_000 }); // prettier-ignore

  // Small tasks: the 1M backlog.
  {
    const etcd = await startEtcd({ args: SCALE_ETCD_ARGS });
    let stack: Stack | undefined;
    try {
      stack = await stackOf('scale-small', etcd);
      const s = stack;
      const small = { restarted: false };
      await step(`${fmt(o.tasks)} small tasks`, async () => {
        small.restarted = (await measureDataSet(o, etcd, s, { label: 'small', count: o.tasks, payloadBytes: 10, batch: 1000 }, rows)).restarted; // prettier-ignore
      });
      if (small.restarted) {
        await step('grants at the backlog', async () => {
          rows.push(await measureGrants(o, { etcd, stack: s }, o.tasks));
        });
        await step('purge and retention', () => measureEndedWork(o, s, o.tasks, rows));
      } else {
        rows.push(
          failedRow(
            `scale: grants, purge and retention at ${fmt(o.tasks)} pending`,
            '',
            'skipped: no coordinator after the restart',
          ),
        );
      }
    } finally {
      await stack?.stop();
      await etcd.stop();
    }
  }

  // Large tasks: 10k × 64 KiB (as many per request as fit 1 MiB; the JSON adds ~40 B per task).
  if (o.largeTasks > 0) {
    const etcd = await startEtcd({ args: SCALE_ETCD_ARGS });
    let stack: Stack | undefined;
    try {
      stack = await stackOf('scale-large', etcd);
      const s = stack;
      const batch = Math.max(1, Math.min(1000, Math.floor((960 * KIB) / (o.largeBytes + 200))));
      await step(`${fmt(o.largeTasks)} large tasks`, async () => {
        await measureDataSet(
          o,
          etcd,
          s,
          { label: 'large', count: o.largeTasks, payloadBytes: o.largeBytes, batch },
          rows,
        );
      });
    } finally {
      await stack?.stop();
      await etcd.stop();
    }
  }
  return rows;
}
