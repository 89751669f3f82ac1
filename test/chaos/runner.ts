/**
 * `runChaos(options)`: start the cluster under test, run a scenario (the seeded random mix or a
 * named design-note case) with a progress line per second on stderr, heal, wait for every task
 * to complete within the bound, collect the history, check it, and write `summary.json`,
 * `history.json` and `timeline.html` into the output directory.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { startChaosCluster, type ChaosCluster } from '../harness/chaos-cluster.js';
import { REPO_ROOT } from '../harness/service.js';
import { checkHistory, countByName, logFinding, type Violation } from './checker.js';
import { parseWorkerLog, readDecisions, readOwnerHistory, readResults } from './collect.js';
import type { FaultWindow, History, ProcessLog } from './history.js';
import { FaultLog, nowMs } from './nemesis.js';
import { Prng } from './prng.js';
import { renderTimeline } from './report-html.js';
import { findScenario, type ScenarioContext, type ScenarioSettings } from './scenarios.js';
import { describeNemesis } from './schedule.js';
import { Workload } from './workload.js';

export const HANDLER_PATH = join(REPO_ROOT, 'test/chaos/fixtures/chaos-handler.mjs');

export type Sabotage = 'skip-fence' | 'grant-before-advance';

export interface ChaosOptions {
  readonly seed: number;
  /** Length of the fault phase (random mix). Default 60 s. */
  readonly durationMs?: number;
  /** Default `random-mix`. */
  readonly scenario?: string;
  readonly etcdMembers?: number;
  readonly sabotage?: Sabotage | undefined;
  readonly coordinators?: number;
  readonly workers?: number;
  readonly tasks?: number;
  readonly resources?: number;
  /** Share of tasks whose worker pauses past its lease before writing. Default 0.15. */
  readonly pauseRate?: number;
  /** Mean time between faults. Default 5 s. */
  readonly intervalMs?: number;
  readonly sessionTtlMs?: number;
  /** After the last heal, every task must complete within this. Default 45 s. */
  readonly completionBoundMs?: number;
  /** Default `chaos-results/<scenario>-seed<seed>-<time>` in the repository. */
  readonly outDir?: string;
  /** Progress lines (one per second); default: to stderr. `false` = silent. */
  readonly progress?: boolean | ((line: string) => void);
}

export interface ChaosSummary {
  readonly ok: boolean;
  readonly scenario: string;
  readonly seed: number;
  readonly sabotage: Sabotage | null;
  readonly options: Record<string, unknown>;
  readonly startedAt: string;
  readonly durationsMs: {
    readonly startup: number;
    readonly scenario: number;
    readonly recovery: number;
    readonly collect: number;
    readonly total: number;
  };
  readonly schedule: readonly { atMs: number; durationMs: number; fault: string }[];
  readonly faults: Record<string, number>;
  readonly tasks: { readonly submitted: number; readonly completed: number };
  readonly grants: number;
  readonly workerWrites: Record<string, number>;
  readonly sinkDecisions: Record<string, number>;
  readonly etcdHistory: boolean;
  readonly violationCounts: Record<string, number>;
  /** The first 200. */
  readonly violations: readonly Violation[];
  readonly files: {
    readonly summary: string;
    readonly history: string;
    readonly timeline: string;
    readonly logs: string;
  };
  readonly error?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function sabotageEnv(sabotage: Sabotage | undefined): {
  sinkEnv: Record<string, string>;
  coordinatorEnv: Record<string, string>;
} {
  if (sabotage === 'skip-fence')
    return {
      sinkEnv: { LEASEHOLD_SINK_TEST_SABOTAGE: 'skip-fence', LEASEHOLD_ALLOW_SABOTAGE: '1' },
      coordinatorEnv: {},
    };
  if (sabotage === 'grant-before-advance')
    return {
      sinkEnv: {},
      coordinatorEnv: { LEASEHOLD_COORDINATOR_TEST_SABOTAGE: 'grant-before-advance', LEASEHOLD_ALLOW_SABOTAGE: '1' },
    };
  return { sinkEnv: {}, coordinatorEnv: {} };
}

function count<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return out;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosSummary> {
  const t0 = nowMs();
  const scenario = findScenario(options.scenario ?? 'random-mix');
  const settings: ScenarioSettings = {
    seed: options.seed,
    durationMs: options.durationMs ?? 60_000,
    sessionTtlMs: options.sessionTtlMs ?? 2_000,
    tasks: options.tasks ?? 60,
    resources: options.resources ?? 12,
    pauseRate: options.pauseRate ?? 0.15,
    intervalMs: options.intervalMs ?? 5_000,
    etcdMembers: options.etcdMembers ?? 1,
    coordinators: scenario.cluster?.coordinators ?? options.coordinators ?? 2,
    workers: scenario.cluster?.workers ?? options.workers ?? 4,
  };
  const stamp = new Date(t0).toISOString().replace(/[:.]/g, '-');
  const outDir = resolve(
    options.outDir ?? join(REPO_ROOT, 'chaos-results', `${scenario.name}-seed${options.seed}-${stamp}`),
  );
  mkdirSync(outDir, { recursive: true });
  const progress =
    options.progress === false
      ? () => undefined
      : typeof options.progress === 'function'
        ? options.progress
        : (line: string) => process.stderr.write(`${line}\n`);
  const files = {
    summary: join(outDir, 'summary.json'),
    history: join(outDir, 'history.json'),
    timeline: join(outDir, 'timeline.html'),
    logs: join(outDir, 'cluster'),
  };
  const completionBoundMs = options.completionBoundMs ?? 45_000;
  progress(
    `[chaos] scenario ${scenario.name}, seed ${options.seed}, etcd ${settings.etcdMembers}, sabotage ${options.sabotage ?? 'none'}, out ${outDir}`,
  );

  const { sinkEnv, coordinatorEnv } = sabotageEnv(options.sabotage);
  const faults = new FaultLog();
  let cluster: ChaosCluster | undefined;
  let workload: Workload | undefined;
  let error: string | undefined;
  const ctxBox: { ctx?: ScenarioContext } = {};
  const times = { startup: 0, scenario: 0, recovery: 0, collect: 0 };
  let healedAtMs = nowMs();
  let history: History | undefined;
  let phase = 'starting';
  const ticker = setInterval(() => {
    const elapsed = Math.round((nowMs() - t0) / 1000);
    const active = faults.describeActive();
    const w = workload;
    progress(
      `[chaos ${String(elapsed).padStart(4)}s] ${phase.padEnd(10)} faults ${faults.windows.length + faults.active.size}` +
        `${active === '' ? '' : ` (now: ${active})`} tasks ${w?.completed() ?? 0}/${w?.records.size ?? 0} completed`,
    );
  }, 1_000);
  ticker.unref();

  try {
    cluster = await startChaosCluster({
      etcdMembers: settings.etcdMembers,
      coordinators: settings.coordinators,
      workers: settings.workers,
      sessionTtlMs: settings.sessionTtlMs,
      handlerPath: HANDLER_PATH,
      sinkEnv,
      coordinatorEnv,
      seed: options.seed,
      dir: files.logs,
      ...(scenario.cluster?.startWorkers === undefined ? {} : { startWorkers: scenario.cluster.startWorkers }),
    });
    times.startup = nowMs() - t0;
    workload = new Workload(cluster);
    const ctx: ScenarioContext = {
      cluster,
      faults,
      workload,
      rng: new Prng(options.seed),
      settings,
      notes: {},
      schedule: [],
      progress,
    };
    ctxBox.ctx = ctx;
    const poller = setInterval(() => void workload?.poll(), 1_000);
    poller.unref();
    phase = 'scenario';
    const s0 = nowMs();
    try {
      await scenario.run(ctx);
    } catch (err) {
      error = `scenario failed: ${err instanceof Error ? err.message : String(err)}`;
      progress(`[chaos] ${error}`);
    } finally {
      clearInterval(poller);
    }
    times.scenario = nowMs() - s0;
    phase = 'recovery';
    await cluster.healAll();
    for (const id of [...faults.active.keys()]) faults.close(id);
    healedAtMs = nowMs();
    const done = await workload.waitCompleted(undefined, completionBoundMs);
    times.recovery = nowMs() - healedAtMs;
    if (!done) progress(`[chaos] not every task completed within ${completionBoundMs} ms of the heal`);
    // Let late writes of self-paused workers land before reading the sink.
    await sleep(500);
  } catch (err) {
    error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    progress(`[chaos] run failed: ${error}`);
  }

  phase = 'collect';
  const c0 = nowMs();
  try {
    if (cluster !== undefined && workload !== undefined) {
      history = await collectHistory(cluster, workload, faults, t0, healedAtMs, completionBoundMs);
    }
  } catch (err) {
    error = `${error === undefined ? '' : `${error}\n`}collect failed: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    if (cluster !== undefined) {
      await cluster.stop().catch(() => undefined);
      // etcd's data dirs are ~60 MB of preallocated WAL: keep only the logs (and sink.db).
      if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined)
        for (const name of cluster.etcdNames) rmSync(join(files.logs, name), { recursive: true, force: true });
    }
    clearInterval(ticker);
  }
  times.collect = nowMs() - c0;

  let violations: Violation[] = [];
  if (history !== undefined) {
    // Only the exits before the final stop count (the stop itself is expected).
    violations = checkHistory(history);
    const ctx = ctxBox.ctx;
    if (scenario.expect !== undefined && ctx !== undefined) violations.push(...scenario.expect(history, ctx.notes));
    // Logs stay in cluster/; the history keeps only the lines the checker flags (replays the same).
    const slim = {
      ...history,
      logs: history.logs.map((l) => ({
        process: l.process,
        text: l.text
          .split('\n')
          .filter((line) => logFinding(line) !== undefined)
          .join('\n'),
      })),
    };
    writeFileSync(files.history, `${JSON.stringify(slim, null, 1)}\n`);
  }
  const summary: ChaosSummary = {
    ok: error === undefined && history !== undefined && violations.length === 0,
    scenario: scenario.name,
    seed: options.seed,
    sabotage: options.sabotage ?? null,
    options: { ...settings, completionBoundMs },
    startedAt: new Date(t0).toISOString(),
    durationsMs: {
      startup: Math.round(times.startup),
      scenario: Math.round(times.scenario),
      recovery: Math.round(times.recovery),
      collect: Math.round(times.collect),
      total: Math.round(nowMs() - t0),
    },
    schedule: (ctxBox.ctx?.schedule ?? []).map((s) => ({
      atMs: s.atMs,
      durationMs: s.durationMs,
      fault: describeNemesis(s.nemesis),
    })),
    faults: count(history?.faults ?? faults.all(), (f) => f.kind),
    tasks: { submitted: workload?.records.size ?? 0, completed: workload?.completed() ?? 0 },
    grants: history?.events.filter((e) => e.kind === 'grant').length ?? 0,
    workerWrites: count(
      (history?.events ?? []).flatMap((e) => (e.kind === 'write' ? [e.outcome] : [])),
      (o) => o,
    ),
    sinkDecisions: count(history?.decisions ?? [], (d) => `${d.kind}:${d.outcome}`),
    etcdHistory: history?.owners !== undefined,
    violationCounts: countByName(violations),
    violations: violations.slice(0, 200),
    files,
    ...(error === undefined ? {} : { error }),
  };
  writeFileSync(files.summary, `${JSON.stringify(summary, null, 2)}\n`);
  if (history !== undefined) writeFileSync(files.timeline, renderTimeline(history, violations, summary));
  progress(
    `[chaos] ${summary.ok ? 'OK' : 'FAILED'}: ${violations.length} violation(s) ${JSON.stringify(summary.violationCounts)}, ` +
      `${summary.tasks.completed}/${summary.tasks.submitted} tasks, ${summary.grants} grants, total ${Math.round(summary.durationsMs.total / 1000)} s`,
  );
  return summary;
}

async function collectHistory(
  cluster: ChaosCluster,
  workload: Workload,
  faults: FaultLog,
  startedAtMs: number,
  healedAtMs: number,
  completionBoundMs: number,
): Promise<History> {
  const logs: ProcessLog[] = [];
  const events = [];
  const selfPauses: Omit<FaultWindow, 'id'>[] = [];
  for (const p of cluster.processes.values()) {
    if (p.role === 'etcd' || p.logPath === undefined) continue;
    let text = '';
    try {
      text = readFileSync(p.logPath, 'utf8');
    } catch {
      continue; // never started
    }
    logs.push({ process: p.name, text });
    if (p.role === 'worker') {
      const parsed = parseWorkerLog(p.name, text);
      events.push(...parsed.events);
      selfPauses.push(...parsed.selfPauses);
    }
  }
  const { decisions, complete } = await readDecisions(cluster.sinkClient);
  const owners = await readOwnerHistory(cluster.etcdEndpoints, cluster.prefix);
  const resources = [...new Set([...workload.records.values()].map((t) => t.resource))];
  const finalResults = await readResults(cluster.sinkClient, resources);
  const windows = faults.all();
  let id = windows.reduce((m, w) => Math.max(m, w.id), 0);
  return {
    startedAtMs,
    endedAtMs: nowMs(),
    healedAtMs,
    completionBoundMs,
    tasks: [...workload.records.values()],
    events: events.sort((a, b) => a.atMs - b.atMs),
    faults: [...windows, ...selfPauses.map((w) => ({ ...w, id: ++id }))].sort((a, b) => a.startMs - b.startMs),
    decisions,
    decisionsComplete: complete,
    owners,
    finalTasks: workload.finalTasks(),
    finalResults,
    logs,
    exits: [...cluster.exits],
  };
}

/** `90s`, `10m`, `1h`, `1500ms` or a bare number of seconds → milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null) throw new Error(`not a duration: ${text} (use e.g. 90s, 10m, 1h)`);
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return Math.round(n * (unit === 'ms' ? 1 : unit === 's' ? 1_000 : unit === 'm' ? 60_000 : 3_600_000));
}
