/**
 * Named scenarios: the design note's cases on real processes, and the seeded random mix. Each
 * drives the cluster through a {@link ScenarioContext} and may add its own expectations, checked
 * against the recorded history next to the general checker.
 */
import { readFileSync } from 'node:fs';
import type { ChaosCluster, ChaosClusterOptions } from '../harness/chaos-cluster.js';
import { ViolationName, type Violation } from './checker.js';
import type { History, WorkerEvent } from './history.js';
import { type FaultLog, nowMs, runNemesis } from './nemesis.js';
import type { Prng } from './prng.js';
import { buildSchedule, type FaultMix, type ScheduleStep } from './schedule.js';
import { buildTasks, type TaskSpec, type Workload } from './workload.js';

export interface ScenarioSettings {
  readonly seed: number;
  readonly durationMs: number;
  readonly sessionTtlMs: number;
  readonly tasks: number;
  readonly resources: number;
  readonly pauseRate: number;
  readonly intervalMs: number;
  readonly etcdMembers: number;
  readonly coordinators: number;
  readonly workers: number;
  /** The fault mechanisms this run has (what the random schedule may draw). */
  readonly mix: FaultMix;
}

export interface ScenarioContext {
  readonly cluster: ChaosCluster;
  readonly faults: FaultLog;
  readonly workload: Workload;
  readonly rng: Prng;
  readonly settings: ScenarioSettings;
  /** Facts the scenario records for its own expectations (JSON-safe). */
  readonly notes: Record<string, unknown>;
  /** The schedule of the random mix, for the summary. */
  schedule: ScheduleStep[];
  progress(text: string): void;
}

export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Overrides of the cluster shape (e.g. start the workers one by one). */
  readonly cluster?: Partial<
    Pick<ChaosClusterOptions, 'workers' | 'startWorkers' | 'coordinators' | 'etcdMembers' | 'smallDiskBytes'>
  > & {
    /** The coordinators run under libfaketime. */
    readonly clock?: boolean;
    /** Needs root (network namespaces, mounts): the run is skipped with this reason otherwise. */
    readonly needsRoot?: string;
  };
  /** Can run against a deployed cluster (`--target`): uses only processes, links, clocks and the admin API. */
  readonly target?: boolean;
  run(ctx: ScenarioContext): Promise<void>;
  expect?(history: History, notes: Readonly<Record<string, unknown>>): Violation[];
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export function expectation(message: string): Violation {
  return { name: ViolationName.SCENARIO_EXPECTATION, message };
}

/** Wait until a line of `process`'s log parses to an entry matching `match`. */
export async function waitForLog(
  cluster: ChaosCluster,
  process: string,
  match: (entry: Record<string, unknown>) => boolean,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  const path = cluster.processes.get(process)?.logPath;
  if (path === undefined) throw new Error(`no log for ${process}`);
  const deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    let text = '';
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      // not created yet
    }
    for (const line of text.split('\n')) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (match(entry)) return entry;
      } catch {
        // partial line
      }
    }
    await sleep(100);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for a log line of ${process}`);
}

export async function startWorker(ctx: ScenarioContext, name: string): Promise<void> {
  const p = ctx.cluster.processes.get(name);
  if (p === undefined) throw new Error(`no ${name}`);
  await p.restart();
}

export function task(
  ctx: ScenarioContext,
  id: string,
  resource: string,
  extra: Partial<TaskSpec['payload']> = {},
): TaskSpec {
  return {
    taskId: `${id}-${ctx.settings.seed}`,
    resource,
    payload: { n: ctx.rng.int(1, 1000), deterministic: true, computeMs: 20, pauseMs: 0, ...extra },
  };
}

export const writesOf = (h: History, process: string, taskId: string): Extract<WorkerEvent, { kind: 'write' }>[] =>
  h.events.filter(
    (e): e is Extract<WorkerEvent, { kind: 'write' }> =>
      e.kind === 'write' && e.process === process && e.taskId === taskId,
  );

/** Long enough past the session TTL that the coordinator has expired the session. */
export const pastLease = (ctx: ScenarioContext): number => Math.round(ctx.settings.sessionTtlMs * 2.5 + 1_000);

/**
 * The seeded random mix: the schedule (drawn from the run's fault mix, or `mix`) runs while
 * `specs` are submitted over the first 70 % of the fault phase.
 */
export async function runMix(ctx: ScenarioContext, specs: readonly TaskSpec[], mix?: FaultMix): Promise<void> {
  const s = ctx.settings;
  ctx.schedule = buildSchedule(
    { seed: s.seed, durationMs: s.durationMs, intervalMs: s.intervalMs },
    ctx.cluster.topology,
    mix ?? s.mix,
  );
  const start = nowMs();
  const submitter = (async () => {
    const spread = (s.durationMs * 0.7) / Math.max(1, specs.length);
    for (let i = 0; i < specs.length; i++) {
      const due = start + i * spread;
      if (nowMs() < due) await sleep(due - nowMs());
      await ctx.workload.submit(specs[i]!);
    }
  })();
  for (const step of ctx.schedule) {
    const due = start + step.atMs;
    if (nowMs() < due) await sleep(due - nowMs());
    await runNemesis(ctx.cluster, ctx.faults, step.nemesis, step.durationMs);
  }
  const end = start + s.durationMs;
  if (nowMs() < end) await sleep(end - nowMs());
  await submitter;
}

export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'random-mix',
    target: true,
    description:
      'Seeded random faults (pause/kill any process incl. the etcd leader, blackhole/one-way/reset/latency on any link) every ~5 s under a workload where some workers pause between computing and writing, and a quarter of the tasks have a small retry policy and a handler that fails some attempts.',
    async run(ctx) {
      const s = ctx.settings;
      await runMix(
        ctx,
        buildTasks(ctx.rng.fork(1), {
          tasks: s.tasks,
          resources: s.resources,
          pauseRate: s.pauseRate,
          pauseMinMs: Math.round(s.sessionTtlMs * 1.5),
          pauseMaxMs: Math.round(s.sessionTtlMs * 2.5),
          taskPrefix: `mix-${s.seed}`,
          // Not under faked coordinator clocks: a coordinator ahead by S stores each backoff S late
          // for its peers (N8), so the completion bound could not hold for a task that failed.
          retryRate: s.mix.clock === true ? 0 : 0.25,
        }),
      );
    },
  },
  {
    name: 'pause-past-lease-then-takeover',
    description:
      "Design note case 3: worker-0 stops itself after its deadline check, past its lease; worker-1 takes over (fence first) and completes; worker-0's late write is refused STALE_TOKEN and worker-1's result stands.",
    cluster: { workers: 2, startWorkers: false },
    async run(ctx) {
      await startWorker(ctx, 'worker-0');
      const t = task(ctx, 'takeover', 'story/1', { pauseMs: pastLease(ctx) });
      ctx.notes.taskId = t.taskId;
      await ctx.workload.submit(t);
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'chaos: self-pause', 20_000);
      await startWorker(ctx, 'worker-1');
      await ctx.workload.waitCompleted([t.taskId], 30_000);
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'write refused by the sink', pastLease(ctx) + 10_000);
    },
    expect(h, notes) {
      const taskId = String(notes.taskId);
      const out: Violation[] = [];
      const a = writesOf(h, 'worker-0', taskId);
      if (!a.some((w) => w.outcome === 'STALE_TOKEN'))
        out.push(expectation(`worker-0's late write was not refused STALE_TOKEN (${JSON.stringify(a)})`));
      const b = writesOf(h, 'worker-1', taskId).find((w) => w.outcome === 'written');
      const stored = h.finalResults.find((r) => r.resultId === `task:${taskId}`);
      if (b === undefined || stored?.token !== b.token)
        out.push(expectation(`worker-1's result does not stand (stored token ${stored?.token ?? 'none'})`));
      return out;
    },
  },
  {
    name: 'expiry-without-takeover',
    description:
      'Design note case 2 (a non-guarantee): worker-0 pauses past its lease but nobody takes over; the fence is unchanged, so its late write is accepted. The task is then re-granted and completes (the stored result stands).',
    cluster: { workers: 1 },
    async run(ctx) {
      const t = task(ctx, 'expiry', 'story/2', { pauseMs: pastLease(ctx), deterministic: false });
      ctx.notes.taskId = t.taskId;
      await ctx.workload.submit(t);
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'chaos: self-pause', 20_000);
      await ctx.workload.waitCompleted([t.taskId], pastLease(ctx) + 30_000);
    },
    expect(h, notes) {
      const taskId = String(notes.taskId);
      const writes = writesOf(h, 'worker-0', taskId);
      const first = writes[0];
      const out: Violation[] = [];
      if (first?.outcome !== 'written')
        out.push(expectation(`the late write after expiry was not accepted: ${JSON.stringify(first)}`));
      const stored = h.finalResults.find((r) => r.resultId === `task:${taskId}`);
      if (first !== undefined && stored?.token !== first.token)
        out.push(expectation(`the first stored result did not stand (stored token ${stored?.token ?? 'none'})`));
      return out;
    },
  },
  {
    name: 'replay-conflict',
    description:
      'Design note case 4: worker-0 (deterministic task) and worker-1 (non-deterministic task) each stop past their lease and land late with nobody taking over; worker-2 then gets both again: the deterministic write is a replay (accepted, nothing changes), the other a RESULT_CONFLICT (refused; the first result stands). Both complete.',
    cluster: { workers: 3, startWorkers: false },
    async run(ctx) {
      const det = task(ctx, 'replay', 'story/3', { pauseMs: pastLease(ctx), deterministic: true });
      const nondet = task(ctx, 'conflict', 'story/4', { pauseMs: pastLease(ctx), deterministic: false });
      ctx.notes.replay = det.taskId;
      ctx.notes.conflict = nondet.taskId;
      await startWorker(ctx, 'worker-0');
      await ctx.workload.submit(det);
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'chaos: self-pause', 20_000);
      // worker-1 takes the second task before the first is free again (the session TTL).
      await startWorker(ctx, 'worker-1');
      await ctx.workload.submit(nondet);
      await waitForLog(ctx.cluster, 'worker-1', (e) => e.msg === 'chaos: self-pause', 20_000);
      for (const w of ['worker-0', 'worker-1'])
        await waitForLog(ctx.cluster, w, (e) => e.msg === 'result written', pastLease(ctx) + 10_000);
      await startWorker(ctx, 'worker-2');
      await ctx.workload.waitCompleted([det.taskId, nondet.taskId], 30_000);
    },
    expect(h, notes) {
      const out: Violation[] = [];
      const outcomes = (taskId: string) =>
        h.events.flatMap((e) => (e.kind === 'write' && e.taskId === taskId ? [`${e.process}:${e.outcome}`] : []));
      const det = outcomes(String(notes.replay));
      const nondet = outcomes(String(notes.conflict));
      if (!(det.includes('worker-0:written') && det.includes('worker-2:replayed')))
        out.push(
          expectation(`deterministic task: expected worker-0 written, worker-2 replayed; saw ${det.join(', ')}`),
        );
      if (!(nondet.includes('worker-1:written') && nondet.includes('worker-2:RESULT_CONFLICT')))
        out.push(
          expectation(
            `non-deterministic task: expected worker-1 written, worker-2 RESULT_CONFLICT; saw ${nondet.join(', ')}`,
          ),
        );
      return out;
    },
  },
  {
    name: 'coordinator-restart-keeps-tokens',
    description:
      'Design note case 5 (coordinator side): tasks on two resources, SIGKILL both coordinators and restart them, more tasks on the same resources: every token after the restart is higher than every token before.',
    async run(ctx) {
      const before = Array.from({ length: 8 }, (_, i) => task(ctx, `before-${i}`, `keep/${i % 2}`));
      for (const t of before) await ctx.workload.submit(t);
      await ctx.workload.waitCompleted(
        before.map((t) => t.taskId),
        30_000,
      );
      ctx.notes.restartAtMs = nowMs();
      for (const c of ctx.cluster.coordinators) await ctx.cluster.processes.get(c.spec.name)!.kill();
      const id = ctx.faults.open(
        'kill',
        ctx.cluster.coordinators.map((c) => c.spec.name),
        'kill every coordinator',
      );
      await sleep(500);
      for (const c of ctx.cluster.coordinators) await ctx.cluster.processes.get(c.spec.name)!.restart();
      ctx.faults.close(id);
      const after = Array.from({ length: 8 }, (_, i) => task(ctx, `after-${i}`, `keep/${i % 2}`));
      for (const t of after) await ctx.workload.submit(t);
      await ctx.workload.waitCompleted(
        after.map((t) => t.taskId),
        30_000,
      );
    },
    expect(h, notes) {
      const at = Number(notes.restartAtMs);
      const out: Violation[] = [];
      for (const resource of ['keep/0', 'keep/1']) {
        const grants = h.events.filter((e) => e.kind === 'grant' && e.resource === resource);
        const pre = grants.filter((g) => g.atMs < at).map((g) => BigInt(g.token));
        const post = grants.filter((g) => g.atMs > at).map((g) => BigInt(g.token));
        const maxPre = pre.reduce((m, t) => (t > m ? t : m), 0n);
        if (post.length === 0) out.push(expectation(`${resource}: no grant after the coordinator restart`));
        for (const t of post)
          if (t <= maxPre) out.push(expectation(`${resource}: token ${t} after the restart <= ${maxPre} before`));
      }
      return out;
    },
  },
  {
    name: 'sink-restart-keeps-fences',
    description:
      "Design note case 5 (sink side): worker-1 takes over from a paused worker-0 (fence advanced), the sink is SIGKILLed and restarted, the fence survived, and worker-0's late write is refused STALE_TOKEN.",
    cluster: { workers: 2, startWorkers: false },
    async run(ctx) {
      await startWorker(ctx, 'worker-0');
      const t = task(ctx, 'sink-restart', 'story/5', { pauseMs: pastLease(ctx) + 3_000 });
      ctx.notes.taskId = t.taskId;
      await ctx.workload.submit(t);
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'chaos: self-pause', 20_000);
      await startWorker(ctx, 'worker-1');
      await ctx.workload.waitCompleted([t.taskId], 30_000);
      ctx.notes.fenceBefore = (await ctx.cluster.sinkClient.getFence(t.resource)).toString();
      const sink = ctx.cluster.processes.get('sink')!;
      const id = ctx.faults.open('kill', ['sink'], 'kill sink');
      await sink.kill();
      await sink.restart();
      ctx.faults.close(id);
      ctx.notes.fenceAfter = (await ctx.cluster.sinkClient.getFence(t.resource)).toString();
      await waitForLog(ctx.cluster, 'worker-0', (e) => e.msg === 'write refused by the sink', pastLease(ctx) + 15_000);
    },
    expect(h, notes) {
      const out: Violation[] = [];
      if (notes.fenceBefore !== notes.fenceAfter || notes.fenceBefore === '0')
        out.push(
          expectation(`fence before the sink restart ${String(notes.fenceBefore)}, after ${String(notes.fenceAfter)}`),
        );
      const a = writesOf(h, 'worker-0', String(notes.taskId));
      if (!a.some((w) => w.outcome === 'STALE_TOKEN'))
        out.push(expectation(`worker-0's late write was not refused STALE_TOKEN (${JSON.stringify(a)})`));
      return out;
    },
  },
];
