/**
 * `runChaos(options)`: start the cluster under test (or connect to a deployed one, `target`), run a
 * scenario (the seeded random mix or a named case) with a progress line per second on stderr, heal,
 * wait for every task to complete within the bound, collect the history (with a live etcd watch for
 * lease timing and /proc samples when asked), check it, and write `summary.json`, `history.json`
 * and `timeline.html` into the output directory.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { findLibfaketime } from '@leasehold/devkit';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { networkUnavailable, startChaosCluster, type ChaosCluster } from '../harness/chaos-cluster.js';
import type { NetworkMode } from '../harness/chaos-topology.js';
import type { ChaosClusterOptions } from '../harness/chaos-types.js';
import { REPO_ROOT } from '../harness/service.js';
import {
  checkBacklogKept,
  countBacklog,
  isBacklogTask,
  submitBacklog,
  type BacklogCount,
  type BacklogStats,
} from './backlog.js';
import { checkHistory, countByName, logFinding, type Violation } from './checker.js';
import { checkLeaseBounds } from './checker-leases.js';
import { checkRegister } from './checker-register.js';
import { checkRetries } from './checker-retries.js';
import { checkResources } from './checker-resources.js';
import { collectHistory } from './collect.js';
import type { History, LeaseTiming } from './history.js';
import type { ChaosOptions, Sabotage } from './options.js';
import { skippedSummary, type ChaosSummary } from './summary.js';
import { LiveOwnerWatch } from './live-watch.js';
import { FaultLog, nowMs } from './nemesis.js';
import { Prng } from './prng.js';
import { renderTimeline } from './report-html.js';
import { ResourceSampler } from './resources.js';
import { findScenario } from './scenario-list.js';
import type { ScenarioContext, ScenarioSettings } from './scenarios.js';
import { describeNemesis } from './schedule.js';
import { connectTarget } from './target.js';
import { Workload } from './workload.js';

export const HANDLER_PATH = join(REPO_ROOT, 'test/chaos/fixtures/chaos-handler.mjs');

export { parseDuration, SABOTAGES, type ChaosOptions, type Sabotage } from './options.js';
export type { ChaosSummary } from './summary.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The sabotage entry points (test only, never packed): the real daemons with a lying collaborator. */
export const SABOTAGE_BIN = {
  sink: join(REPO_ROOT, 'test/chaos/sabotage/sink.mjs'),
  coordinator: join(REPO_ROOT, 'test/chaos/sabotage/coordinator.mjs'),
} as const;

/**
 * Which daemon a sabotage breaks, and how: it runs the sabotage entry point instead of its bin,
 * told the mode by LEASEHOLD_TEST_SABOTAGE (read only by that script). `fake-monotonic` breaks
 * no daemon (the coordinators' clocks, below).
 */
function sabotageLaunch(
  sabotage: Sabotage | undefined,
): Pick<ChaosClusterOptions, 'sinkBin' | 'sinkEnv' | 'coordinatorBin' | 'coordinatorEnv'> {
  if (sabotage === 'skip-fence') return { sinkBin: SABOTAGE_BIN.sink, sinkEnv: { LEASEHOLD_TEST_SABOTAGE: sabotage } };
  if (sabotage === 'grant-before-advance' || sabotage === 'ignore-retry-policy')
    return { coordinatorBin: SABOTAGE_BIN.coordinator, coordinatorEnv: { LEASEHOLD_TEST_SABOTAGE: sabotage } };
  return {};
}

function count<T>(items: readonly T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return out;
}

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

/** Standing skews of the coordinators' clocks (seconds), from the seed: coordinator-0 is on time. */
function clockSkews(seed: number, coordinators: number): number[] {
  const rng = new Prng(seed ^ 0xc10c);
  return Array.from({ length: coordinators }, (_, j) => (j === 0 ? 0 : (rng.chance(0.5) ? 1 : -1) * rng.int(10, 91)));
}

export async function runChaos(options: ChaosOptions): Promise<ChaosSummary> {
  const t0 = nowMs();
  const scenario = findScenario(options.scenario ?? 'random-mix');
  const notes: string[] = [];
  const sessionTtlMs = options.sessionTtlMs ?? 2_000;
  const etcdMembers = scenario.cluster?.etcdMembers ?? options.etcdMembers ?? 1;
  const coordinators = scenario.cluster?.coordinators ?? options.coordinators ?? 2;
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

  // --- what can run here ---------------------------------------------------------------------
  let network: NetworkMode = options.network ?? 'proxy';
  let clock = options.clock === true || scenario.cluster?.clock === true || options.sabotage === 'fake-monotonic';
  let skipped: string | undefined;
  if (options.target === undefined) {
    if (scenario.cluster?.needsRoot !== undefined && !isRoot())
      skipped = `scenario ${scenario.name} needs root (${scenario.cluster.needsRoot})`;
    const why = network === 'proxy' ? undefined : networkUnavailable(network);
    if (why !== undefined) {
      if (options.unavailable === 'fallback') {
        notes.push(`--network ${network} unavailable (${why}): ran with userspace proxies only`);
        network = 'proxy';
      } else skipped ??= `--network ${network} unavailable: ${why}`;
    }
    if (clock && findLibfaketime() === undefined) {
      const why2 = 'libfaketime not installed (apt-get install faketime, or bash scripts/bootstrap.sh as root)';
      if (options.unavailable === 'fallback' && options.sabotage !== 'fake-monotonic') {
        notes.push(`clock faults unavailable: ${why2}`);
        clock = false;
      } else skipped ??= `clock faults unavailable: ${why2}`;
    }
  }
  const summaryBase = {
    scenario: scenario.name,
    seed: options.seed,
    sabotage: options.sabotage ?? null,
    startedAt: new Date(t0).toISOString(),
    files,
  };
  if (skipped !== undefined) {
    progress(`[chaos] SKIPPED: ${skipped}`);
    const summary = skippedSummary(summaryBase, skipped, options);
    writeFileSync(files.summary, `${JSON.stringify(summary, null, 2)}\n`);
    return summary;
  }

  const settingsBase = {
    seed: options.seed,
    durationMs: options.durationMs ?? 60_000,
    sessionTtlMs,
    tasks: options.tasks ?? 60,
    resources: options.resources ?? 12,
    pauseRate: options.pauseRate ?? 0.15,
    intervalMs: options.intervalMs ?? 5_000,
    etcdMembers,
    coordinators,
    workers: scenario.cluster?.workers ?? options.workers ?? 4,
  };
  const completionBoundMs = options.completionBoundMs ?? 45_000;
  const heartbeatIntervalMs = Math.floor(sessionTtlMs / 4);
  const lease: LeaseTiming = {
    sessionTtlMs,
    heartbeatIntervalMs,
    marginMs: options.leaseMarginMs ?? Math.max(1_000, Math.round(sessionTtlMs / 2)),
  };
  progress(
    `[chaos] scenario ${scenario.name}, seed ${options.seed}, etcd ${etcdMembers}, network ${options.target === undefined ? network : 'target'}, ` +
      `sink ${options.sinkStore ?? 'sqlite'}×${options.sinks ?? 1}, clock ${clock ? 'faked' : 'real'}, sabotage ${options.sabotage ?? 'none'}, out ${outDir}`,
  );

  if (options.coordinatorEnv !== undefined && options.target !== undefined)
    notes.push('--coordinator-env is ignored against a target (its coordinators are configured where they run)');
  if (options.plaintext === true && options.target === undefined) {
    const warning =
      'PLAINTEXT chaos cluster (--plaintext): no TLS on any link — bearer keys, worker secrets and capabilities cross the wire in clear; for local debugging only';
    progress(`[chaos] ${'!'.repeat(20)} ${warning} ${'!'.repeat(20)}`);
    notes.push(warning);
  }
  const sabotaged = sabotageLaunch(options.sabotage);
  const faults = new FaultLog();
  let cluster: ChaosCluster | undefined;
  let workload: Workload | undefined;
  let watch: LiveOwnerWatch | undefined;
  let sampler: ResourceSampler | undefined;
  let error: string | undefined;
  const ctxBox: { ctx?: ScenarioContext } = {};
  const times = { startup: 0, backlog: 0, scenario: 0, recovery: 0, collect: 0 };
  const backlogCount = options.backlog ?? 0;
  let backlog: BacklogStats | undefined;
  let backlogAtEnd: BacklogCount | undefined;
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
    cluster =
      options.target === undefined
        ? await startChaosCluster({
            etcdMembers,
            coordinators,
            workers: settingsBase.workers,
            sessionTtlMs,
            heartbeatIntervalMs,
            handlerPath: HANDLER_PATH,
            ...(sabotaged.sinkBin === undefined ? {} : { sinkBin: sabotaged.sinkBin }),
            ...(sabotaged.coordinatorBin === undefined ? {} : { coordinatorBin: sabotaged.coordinatorBin }),
            sinkEnv: { ...sabotaged.sinkEnv },
            coordinatorEnv: { ...options.coordinatorEnv, ...sabotaged.coordinatorEnv },
            seed: options.seed,
            dir: files.logs,
            network,
            sinkStore: options.sinkStore ?? 'sqlite',
            sinks: options.sinks ?? 1,
            ...(options.plaintext === true ? { plaintext: true } : {}),
            ...(clock
              ? {
                  clock: {
                    skewSeconds: clockSkews(options.seed, coordinators),
                    fakeMonotonic: options.sabotage === 'fake-monotonic',
                  },
                }
              : {}),
            ...(scenario.cluster?.smallDiskBytes === undefined
              ? {}
              : { smallDiskBytes: scenario.cluster.smallDiskBytes }),
            ...(scenario.cluster?.startWorkers === undefined ? {} : { startWorkers: scenario.cluster.startWorkers }),
          })
        : await connectTarget(options.target, files.logs);
    if (options.target !== undefined && scenario.target !== true)
      throw new Error(`scenario ${scenario.name} cannot run against a deployed target (random-mix and register can)`);
    times.startup = nowMs() - t0;
    workload = new Workload(cluster);
    watch = await LiveOwnerWatch.start(cluster.etcdEndpoints, cluster.prefix, cluster.clientTls?.etcd).catch(
      (err: unknown) => {
        notes.push(`live etcd watch unavailable (lease bounds not measured): ${String(err)}`);
        return undefined;
      },
    );
    if (options.resourceSampleMs !== undefined && options.resourceSampleMs > 0) {
      const c = cluster;
      sampler = new ResourceSampler(() => c.processes.values(), options.resourceSampleMs);
    }
    const caps = cluster.network.capabilities;
    const unrestartable = [...cluster.processes.values()].filter((p) => !p.canRestart).map((p) => p.name);
    const protect = [...(options.protect ?? []), ...unrestartable];
    const settings: ScenarioSettings = {
      ...settingsBase,
      mix: {
        proxy: caps.proxy,
        nft: caps.nft,
        netem: caps.netem,
        clock: cluster.clocks.size > 0,
        ...(protect.length === 0 ? {} : { protect }),
        ...(options.target === undefined ? {} : { nftLinks: cluster.network.nftLinks() }),
      },
    };
    if (!caps.netem && caps.nft) notes.push('no tc netem in this kernel: no delay faults, loss by nftables only');
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
    if (backlogCount > 0) {
      phase = 'backlog';
      const c = cluster;
      const b0 = nowMs();
      backlog = await submitBacklog((m, p, b, t) => c.admin(m, p, b, t), { count: backlogCount, progress });
      times.backlog = nowMs() - b0;
      progress(
        `[chaos] backlog: ${backlog.accepted} of ${backlogCount} tasks submitted in ${Math.round(times.backlog / 1000)} s ` +
          `(${backlog.perSecond}/s, ${backlog.batches} batches, ${backlog.retries} retried${backlog.refused > 0 ? `, ${backlog.refused} refused` : ''})`,
      );
    }
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
    if (backlog !== undefined) {
      const c = cluster;
      backlogAtEnd = await countBacklog((m, p, b, t) => c.admin(m, p, b, t)).catch((err: unknown) => {
        notes.push(`the backlog could not be counted at the end: ${String(err)}`);
        return undefined;
      });
    }
  } catch (err) {
    error = err instanceof Error ? (err.stack ?? err.message) : String(err);
    progress(`[chaos] run failed: ${error}`);
  }

  phase = 'collect';
  const c0 = nowMs();
  try {
    if (cluster !== undefined && workload !== undefined) {
      const resources = sampler?.stop();
      await watch?.stop();
      history = await collectHistory(cluster, workload, faults, t0, healedAtMs, completionBoundMs, {
        watch,
        lease,
        // The chaos cluster sets no RETRY_*: its coordinators use the built-in defaults.
        ...(options.target === undefined ? { retryDefaults: DEFAULT_RETRY_POLICY } : {}),
        wallClocksFaked: cluster.clocks.size > 0 || options.target !== undefined,
        ...(cluster.clocks.size === 0
          ? {}
          : {
              clockOffsetsMs: Object.fromEntries(
                clockSkews(options.seed, coordinators).map((sec, j) => [`coordinator-${j}`, sec * 1_000]),
              ),
            }),
        ...(resources === undefined ? {} : { resources }),
        // etcd's history holds every backlog task too: give its replay time to match.
        etcdHistoryTimeoutMs: 20_000 + Math.round(backlogCount / 2),
      });
    }
  } catch (err) {
    error = `${error === undefined ? '' : `${error}\n`}collect failed: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    sampler?.stop();
    await watch?.stop().catch(() => undefined);
    if (cluster !== undefined) {
      await cluster.stop().catch(() => undefined);
      // etcd's data dirs are ~60 MB of preallocated WAL: keep only the logs (and sink.db).
      if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined && options.target === undefined)
        for (const name of cluster.etcdNames) rmSync(join(files.logs, name), { recursive: true, force: true });
    }
    clearInterval(ticker);
  }
  times.collect = nowMs() - c0;

  let violations: Violation[] = [];
  if (history !== undefined) {
    if (history.owners === undefined) {
      const why =
        "etcd's history could not be read: two-live-owners, grant-not-in-etcd, the lease bounds and the retry rules were not judged";
      notes.push(why);
      progress(`[chaos] WARNING: ${why}`);
    }
    violations = checkHistory(history);
    if (backlog !== undefined) violations.push(...checkBacklogKept(backlog, backlogAtEnd, history));
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
  const decisions = history?.decisions ?? [];
  const summary: ChaosSummary = {
    ...summaryBase,
    ok: error === undefined && history !== undefined && violations.length === 0,
    options: {
      ...settingsBase,
      completionBoundMs,
      lease,
      profile: options.profile ?? null,
      protect: options.protect ?? [],
    },
    environment: {
      network: options.target === undefined ? network : 'target',
      tls: options.target === undefined ? options.plaintext !== true : null,
      sinkStore: options.sinkStore ?? 'sqlite',
      sinks: options.sinks ?? 1,
      clock: (cluster?.clocks.size ?? 0) > 0,
      capabilities: { ...(cluster?.network.capabilities ?? {}), disk: cluster?.disk !== undefined },
      notes,
    },
    durationsMs: {
      startup: Math.round(times.startup),
      backlog: Math.round(times.backlog),
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
    tasks: {
      submitted: workload?.records.size ?? 0,
      completed: workload?.completed() ?? 0,
      failed: workload?.failed() ?? 0,
    },
    grants: history?.events.filter((e) => e.kind === 'grant').length ?? 0,
    workerWrites: count(
      (history?.events ?? []).flatMap((e) => (e.kind === 'write' ? [e.outcome] : [])),
      (o) => o,
    ),
    sinkDecisions: count(decisions, (d) => `${d.kind}:${d.outcome}`),
    staleWritesRefused: decisions.filter((d) => d.kind === 'write' && d.outcome === 'STALE_TOKEN').length,
    lateAdvancesRefused: decisions.filter((d) => d.kind === 'advance' && d.outcome === 'STALE_TOKEN').length,
    etcdHistory: history?.owners !== undefined,
    leaseBounds: history?.lease === undefined ? null : checkLeaseBounds(history).stats,
    register: history === undefined ? null : (checkRegister(history).stats ?? null),
    retries: history === undefined ? null : checkRetries(history).stats,
    resources: history === undefined ? [] : checkResources(history).stats,
    backlog:
      backlog === undefined
        ? null
        : {
            ...backlog,
            atEnd: backlogAtEnd ?? null,
            grantedDuringRun: history?.events.filter((e) => e.kind === 'grant' && isBacklogTask(e.taskId)).length ?? 0,
          },
    scenarioNotes: ctxBox.ctx?.notes ?? {},
    violationCounts: countByName(violations),
    violations: violations.slice(0, 200),
    ...(error === undefined ? {} : { error }),
  };
  writeFileSync(files.summary, `${JSON.stringify(summary, null, 2)}\n`);
  if (history !== undefined) writeFileSync(files.timeline, renderTimeline(history, violations, summary));
  progress(
    `[chaos] ${summary.ok ? 'OK' : 'FAILED'}: ${violations.length} violation(s) ${JSON.stringify(summary.violationCounts)}, ` +
      `${summary.tasks.completed}/${summary.tasks.submitted} tasks, ${summary.grants} grants, ${summary.staleWritesRefused} stale writes refused, ` +
      `faults ${JSON.stringify(summary.faults)}, total ${Math.round(summary.durationsMs.total / 1000)} s`,
  );
  return summary;
}
