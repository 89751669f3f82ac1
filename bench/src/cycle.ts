/**
 * Suite `cycle`: full task cycles — submit → a worker gets it → no-op handler → result stored →
 * complete — leasehold against BullMQ, the queue most Node teams would pick instead.
 *
 * Same shape on every side: 8 worker processes × 8 concurrent slots (64 in flight), the bench
 * process submitting in batches of up to 32 from 4 concurrent submitters, keeping at most 2 × 64
 * submitted-but-uncompleted tasks (completions come back from the workers over IPC), one resource
 * per task. Sides, interleaved round by round:
 *   - `leasehold`: admin `POST /v1/tasks/batch` to the built coordinator; worker SDK instances
 *     (`procs/sdk-worker.ts`): grant (owner txn + durable fence advance at the sink) → fenced,
 *     fsynced result write at the sink → `task.complete` (txn);
 *   - `leasehold-3c`: the same on its own stack with three coordinators on one etcd prefix and
 *     one sink, the workers spread over them: total coordinator CPU per task against one;
 *   - `bullmq-always`: `Queue.addBulk` on Debian's redis-server with AOF `appendfsync always`
 *     (every write fsynced before the reply: the durability the sink gives); BullMQ `Worker`s;
 *   - `bullmq-everysec`: the same with `appendfsync everysec` (the usual production setting).
 * CPU per task is the whole system's: servers (coordinator + etcd + sink, or redis) plus the
 * worker processes and the bench process (the submitter). Target: leasehold ≥ 1.0× BullMQ
 * `always` in tasks/s.
 *
 * Before the rounds, the idle cost: the same processes, every slot waiting and nothing submitted,
 * CPU ms per second of each process (leasehold against BullMQ `always`): what a deployment pays
 * while its workers wait, which no per-task figure shows.
 */
import { cpus } from 'node:os';
import { WORKER_DEFAULTS } from '@leasehold/worker';
import { Queue } from 'bullmq';
import { ChildLoad } from './child-load.js';
import type { Etcd } from './infra/etcd.js';
import { Admin } from './infra/raw-worker.js';
import { findRedis, startRedis, type Redis } from './infra/redis.js';
import { startStack, type Stack } from './infra/stack.js';
import { interleaveLoads, median, type Load, type RoundResult } from './measure.js';
import type { Counters } from './procs/protocol.js';
import { systemBusyMs, threadCpuMs } from './infra/proc.js';
import { cpuRow, limitRow, throughputRow, type BenchRow } from './report.js';

export interface CycleOptions {
  readonly etcd: Etcd;
  readonly seconds: number;
  readonly rounds: number;
  readonly maxWarmupSlices: number;
  readonly log: (line: string) => void;
}

export const CYCLE_WORKERS = 8;
export const CYCLE_SLOTS = 8;
const SUBMITTERS = 4;
const SUBMIT_BATCH = 32;
const BACKLOG = CYCLE_WORKERS * CYCLE_SLOTS * 2;
/** The load name of the three-coordinator side. */
const THREE = 'leasehold-3c';
/** The round number the idle measurement starts its workers with (worker ids unlike any round's). */
const IDLE_ROUND = 9_999;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Submit = (ids: readonly number[]) => Promise<number>;

/**
 * The coordinator's call counters from a /metrics text: items and calls of each group-committed
 * kind (`leasehold_coordinator_batch_items{kind}`) and etcd txns by family
 * (`leasehold_coordinator_etcd_txn_seconds_count{txn}`, every outcome). Keys `items:<kind>`,
 * `calls:<kind>`, `txn:<family>`, `hold:<ended>` (completion replies held for their carried
 * acquire), `carried:<taken>` (carried acquires, in the completion's txn or after it), `wake:<result>` (waiting acquires woken by a change, by what they selected); from a
 * sink's /metrics, its write batches as kind `sink_write`.
 */
export function coordinatorCalls(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  const add = (key: string, v: string | undefined) => (out[key] = (out[key] ?? 0) + Number(v ?? 0));
  for (const m of text.matchAll(/^leasehold_coordinator_batch_items_(sum|count)\{kind="([a-z_]+)"\} (\S+)$/gm)) {
    add(`${m[1] === 'sum' ? 'items' : 'calls'}:${m[2] ?? ''}`, m[3]);
  }
  // The sink's write batches (the SDK's group-committed results), read from the sink's own /metrics.
  for (const m of text.matchAll(/^leasehold_sink_write_batch_items_(sum|count) (\S+)$/gm)) {
    add(`${m[1] === 'sum' ? 'items' : 'calls'}:sink_write`, m[2]);
  }
  // Completion replies held for their carried acquire, by how the hold ended (service/carried-acquire.ts).
  for (const m of text.matchAll(/^leasehold_coordinator_completion_holds_total\{ended="([a-z]+)"\} (\S+)$/gm)) {
    add(`hold:${m[1] ?? ''}`, m[2]);
  }
  // Carried acquires, by how each was taken: in the completion's own txn or alone after it (carried-acquire.ts).
  for (const m of text.matchAll(/^leasehold_coordinator_carried_acquires_total\{taken="([a-z_]+)"\} (\S+)$/gm)) {
    add(`carried:${m[1] ?? ''}`, m[2]);
  }
  // Waiting acquires woken by a change of their queue, by what their select found (grants.ts).
  for (const m of text.matchAll(/^leasehold_coordinator_acquire_wakes_total\{result="([a-z]+)"\} (\S+)$/gm)) {
    add(`wake:${m[1] ?? ''}`, m[2]);
  }
  for (const m of text.matchAll(/^leasehold_coordinator_etcd_txn_seconds_count\{([^}]*)\} (\S+)$/gm)) {
    const txn = /(?:^|,)txn="([a-z_]+)"/.exec(m[1] ?? '')?.[1];
    if (txn !== undefined) add(`txn:${txn}`, m[2]);
  }
  return out;
}

/** Per task of the window: etcd txns by family and mean items per group-committed call. */
export function describeCalls(delta: Readonly<Record<string, number>>, tasks: number): string {
  if (tasks <= 0) return '?';
  const txns = Object.entries(delta)
    .filter(([k, v]) => k.startsWith('txn:') && v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k.slice(4)} ${(v / tasks).toFixed(2)}`);
  const kinds = Object.keys(delta)
    .filter((k) => k.startsWith('calls:') && (delta[k] ?? 0) > 0)
    .map((k) => k.slice(6))
    .sort();
  const items = kinds.map((k) => `${k} ${((delta[`items:${k}`] ?? 0) / (delta[`calls:${k}`] ?? 1)).toFixed(1)}`);
  const holds = Object.entries(delta)
    .filter(([k, v]) => k.startsWith('hold:') && v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k.slice(5)} ${(v / tasks).toFixed(2)}`);
  const held =
    holds.length === 0 ? '' : `; completion replies held per task, by how the hold ended: ${holds.join(', ')}`;
  const carried = ['in_completion_txn', 'after_completion']
    .filter((t) => (delta[`carried:${t}`] ?? 0) > 0)
    .map((t) => `${t} ${((delta[`carried:${t}`] ?? 0) / tasks).toFixed(2)}`);
  const carriedText =
    carried.length === 0 ? '' : `; carried acquires per task, by how each was taken: ${carried.join(', ')}`;
  const wakes = ['selected', 'empty']
    .filter((r) => (delta[`wake:${r}`] ?? 0) > 0)
    .map((r) => `${r} ${((delta[`wake:${r}`] ?? 0) / tasks).toFixed(2)}`);
  const woken =
    wakes.length === 0 ? '' : `; waiting acquires woken per task, by what they selected: ${wakes.join(', ')}`;
  return `etcd txns per task: ${txns.join(', ') || 'none'}; items per group-committed call: ${items.join(', ') || 'none'}${held}${carriedText}${woken}`;
}

/** Worker processes + the bench process as the submitter, with a bounded backlog. */
export class CycleLoad implements Load {
  readonly name: string;
  readonly selfIsClient = true;
  readonly workers: ChildLoad;
  readonly #servers: Readonly<Record<string, number>>;
  readonly #submit: Submit;
  readonly #metricsUrls: readonly string[];
  #callsAtBegin: Record<string, number> = {};
  /** Coordinator call counters summed over the measured windows (see {@link coordinatorCalls}). */
  readonly calls: Record<string, number> = {};
  #submitted = 0;
  #done = 0;
  #running = false;
  #submitters: Promise<void>[] = [];
  #seq = 0;
  /** Submit pacing ({@link limitRate}): tasks per second, and the count and time it is measured from. */
  #rate: { readonly perS: number; readonly fromMs: number; readonly fromSubmitted: number } | undefined;
  submitErrors = 0;

  constructor(args: {
    name: string;
    script: string;
    servers: Readonly<Record<string, number>>;
    params: (round: number, worker: number) => Record<string, unknown>;
    submit: Submit;
    /** Coordinators' (and the sink's) base URLs whose /metrics are read (and summed) at each window's begin and end. */
    metricsUrls?: readonly string[];
  }) {
    this.name = args.name;
    this.#metricsUrls = args.metricsUrls ?? [];
    this.#servers = args.servers;
    this.#submit = args.submit;
    this.workers = new ChildLoad({
      name: args.name,
      script: args.script,
      count: CYCLE_WORKERS,
      counted: () => args.servers,
      params: args.params,
    });
    for (const c of this.workers.children) {
      c.onMessage = (m) => {
        if (m.type === 'done') this.#done += Number(m.n);
      };
    }
  }

  counted() {
    return this.#servers;
  }
  clients() {
    return this.workers.clients();
  }

  async #submitter(): Promise<void> {
    while (this.#running) {
      const room = Math.min(SUBMIT_BATCH, BACKLOG - (this.#submitted - this.#done), this.#allowance());
      if (room < 8) {
        await sleep(1);
        continue;
      }
      this.#submitted += room;
      const ids = Array.from({ length: room }, () => this.#seq++);
      try {
        this.submitErrors += await this.#submit(ids);
      } catch {
        this.submitErrors += room;
      }
    }
  }

  /** Tasks the rate limit lets the submitters add now (unbounded without a limit). */
  #allowance(): number {
    const r = this.#rate;
    if (r === undefined) return Number.POSITIVE_INFINITY;
    const due = Math.floor(((performance.now() - r.fromMs) / 1000) * r.perS);
    return due - (this.#submitted - r.fromSubmitted);
  }

  /**
   * Submit at most `perS` tasks per second from now on (still within the backlog bound), or as
   * fast as the workers take them when `undefined`. The takeover suite runs its takeovers at half
   * the cycle's measured maximum rate with this.
   */
  limitRate(perS: number | undefined): void {
    this.#rate = perS === undefined ? undefined : { perS, fromMs: performance.now(), fromSubmitted: this.#submitted };
  }

  /** `idle`: the workers start, nothing is submitted ({@link measureIdle}). */
  async start(round: number, idle = false): Promise<void> {
    this.#submitted = 0;
    this.#rate = undefined;
    this.#done = 0;
    await this.workers.start(round);
    this.#running = true;
    // A fixed submit rate for every side (LEASEHOLD_BENCH_CYCLE_RATE, tasks/s): CPU per task then
    // compares across builds without the closed loop's feedback (a faster build also fills its
    // batches more). A development aid; the published run is unpaced.
    const paced = Number(process.env.LEASEHOLD_BENCH_CYCLE_RATE ?? '');
    if (idle) this.limitRate(0);
    else if (paced > 0) this.limitRate(paced);
    this.#submitters = Array.from({ length: SUBMITTERS }, () => this.#submitter());
  }
  async sample(mark?: 'begin' | 'end'): Promise<Counters> {
    if (this.#metricsUrls.length > 0 && mark !== undefined) {
      const now: Record<string, number> = {};
      for (const url of this.#metricsUrls) {
        const one = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })
          .then(async (r) => coordinatorCalls(await r.text()))
          .catch(() => ({}));
        for (const [k, v] of Object.entries(one)) now[k] = (now[k] ?? 0) + v;
      }
      if (mark === 'begin') this.#callsAtBegin = now;
      else
        for (const [k, v] of Object.entries(now))
          this.calls[k] = (this.calls[k] ?? 0) + v - (this.#callsAtBegin[k] ?? 0);
    }
    return this.workers.sample(mark);
  }
  async stop(): Promise<Record<string, unknown>> {
    this.#running = false;
    await Promise.all(this.#submitters);
    await this.workers.stop();
    return {};
  }
  close(): Promise<void> {
    this.#running = false;
    return this.workers.close();
  }
}

/** The leasehold side (also the background load of the takeover suite, whose own tasks wait in another queue). */
export function leaseholdCycle(stack: Stack, admin: Admin, etcd: Etcd, name = 'leasehold'): CycleLoad {
  // With peers (`startStack({ coordinators })`) worker i is served by coordinator i mod n; the
  // admin submits through the first; every coordinator's CPU is counted (`coordinator`,
  // `coordinator-2`, ...) and their call counters summed.
  const coordinators = [stack.coordinator, ...stack.peers];
  const servers: Record<string, number> = { etcd: etcd.pid, sink: stack.sink.pid };
  coordinators.forEach((c, i) => (servers[i === 0 ? 'coordinator' : `coordinator-${i + 1}`] = c.pid));
  return new CycleLoad({
    name,
    script: 'sdk-worker.js',
    servers,
    params: (round, i) => ({
      coordinatorUrl: (coordinators[i % coordinators.length] ?? stack.coordinator).url,
      sinkUrl: stack.sink.url,
      workerKey: stack.keys.workerKey,
      workerId: `${name}-${round}-${i}`,
      concurrency: CYCLE_SLOTS,
    }),
    metricsUrls: [...coordinators.map((c) => c.url), stack.sink.url],
    submit: (ids) => admin.submitBatch(ids.map((n) => ({ taskId: `${name}-${n}`, resource: `cr/${n}` }))),
  });
}

function bullmqCycle(name: string, redis: Redis, queue: Queue): CycleLoad {
  return new CycleLoad({
    name,
    script: 'bullmq-worker.js',
    servers: { redis: redis.pid },
    params: () => ({ port: redis.port, queue: queue.name, concurrency: CYCLE_SLOTS }),
    submit: async (ids) => {
      await queue.addBulk(ids.map((n) => ({ name: 'task', data: { n: 1, resource: `cr/${n}` } })));
      return 0;
    },
  });
}

/** CPU ms per second of each process of a side while every slot waits and nothing is submitted. */
export interface IdleCost {
  /** The side's servers (coordinator, etcd, sink; or redis), by name. */
  readonly servers: Readonly<Record<string, number>>;
  /** The worker processes together. */
  readonly workers: number;
  readonly total: number;
  /** How long the machine took to settle before the window opened. */
  readonly settleMs: number;
  /** False when `maxSettleMs` passed first (the figure then includes start-up work), as a round's `steady`. */
  readonly steady: boolean;
}

/**
 * Whether the machine has settled, from its busy CPU rate (ms/s, every process) over consecutive
 * windows, oldest first: the last two windows within a fifth of each other (or 20 ms/s, a couple of
 * clock ticks over a short window) and the last below a quarter of the machine's `cores`. Fresh
 * processes spend their first seconds loading modules, compiling and connecting — every side's
 * workers are spawned together, 32 processes on two cores — and a window opened then measures
 * start-up, not waiting (the 00:26 run's idle row: 567 ms/s against ~100 in runs of one side;
 * settling on the side's own processes alone still read 192–257 ms/s for its workers).
 */
export function settled(rates: readonly number[], cores: number): boolean {
  if (rates.length < 2) return false;
  const a = rates[rates.length - 2] ?? 0;
  const b = rates[rates.length - 1] ?? 0;
  // Two saturated windows are alike too: a quarter of the machine at most.
  return b <= 250 * cores && Math.abs(b - a) <= Math.max(0.2 * Math.max(a, b), 20);
}

/**
 * Start `load`'s workers with nothing to do, wait until the machine's CPU has settled
 * ({@link settled}: 1 s windows, at least `minSettleMs`, at most `maxSettleMs`), then read every
 * process's CPU of the side over `seconds`.
 */
export async function measureIdle(
  load: CycleLoad,
  seconds: number,
  minSettleMs = 2_000,
  maxSettleMs = 30_000,
): Promise<IdleCost> {
  await load.start(IDLE_ROUND, true);
  try {
    const pids = { ...load.counted() };
    const clients = load.clients();
    // Per-thread nanoseconds, not clock ticks: idle processes use a few ms each per window.
    const read = () => ({
      servers: Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, threadCpuMs(pid) ?? 0])),
      workers: clients.reduce((a, pid) => a + (threadCpuMs(pid) ?? 0), 0),
    });
    const cores = cpus().length;
    const started = performance.now();
    await sleep(minSettleMs);
    const rates: number[] = [];
    let last = { at: performance.now(), cpu: systemBusyMs() };
    let steady = false;
    while (!(steady = settled(rates, cores)) && performance.now() - started < maxSettleMs) {
      await sleep(1_000);
      const now = { at: performance.now(), cpu: systemBusyMs() };
      rates.push(((now.cpu - last.cpu) / (now.at - last.at)) * 1000);
      last = now;
    }
    const settleMs = performance.now() - started;
    const t0 = performance.now();
    const before = read();
    await sleep(seconds * 1000);
    const after = read();
    const s = (performance.now() - t0) / 1000;
    const servers = Object.fromEntries(
      Object.keys(pids).map((k) => [k, ((after.servers[k] ?? 0) - (before.servers[k] ?? 0)) / s]),
    );
    const workers = (after.workers - before.workers) / s;
    return {
      servers,
      workers,
      total: Object.values(servers).reduce((a, v) => a + v, 0) + workers,
      settleMs,
      steady,
    };
  } finally {
    await load.stop();
    // Not a round: its workers' window figures are none (no sample marks here).
    load.workers.summaries.pop();
  }
}

function describeIdle(c: IdleCost): string {
  const parts = Object.entries(c.servers).map(([k, v]) => `${k} ${Math.round(v)}`);
  const settle = c.steady
    ? `settled after ${(c.settleMs / 1000).toFixed(0)} s`
    : `NOT settled after ${(c.settleMs / 1000).toFixed(0)} s (start-up work included)`;
  return `${parts.join(', ')}, worker processes ${Math.round(c.workers)} (total ${Math.round(c.total)}; ${settle})`;
}

/**
 * `LEASEHOLD_BENCH_CYCLE_SIDES=leasehold,bullmq-always` runs only those sides (a faster A-B loop
 * while developing); unset, every side runs. A row whose sides did not run is left out.
 */
function sideWanted(name: string): boolean {
  const sides = process.env.LEASEHOLD_BENCH_CYCLE_SIDES;
  return sides === undefined || sides.split(',').some((s) => s.trim() === name);
}

export async function runCycleBench(o: CycleOptions): Promise<BenchRow[]> {
  const stack = await startStack({ name: 'cycle', etcd: o.etcd, sessionTtlMs: 10_000, heartbeatIntervalMs: 2_500 });
  const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
  const loads: CycleLoad[] = [];
  const redises: Redis[] = [];
  const queues: Queue[] = [];
  // The same cycle served by three coordinators (own prefix and sink, so its coordinators watch
  // nothing while the other sides run): the issue-27 figure "total coordinator CPU per task with
  // 3 coordinators ≤ 1.2× with one" (every coordinator decodes every watched task record).
  let stack3: Stack | undefined;
  let admin3: Admin | undefined;
  try {
    const leasehold = leaseholdCycle(stack, admin, o.etcd);
    if (sideWanted('leasehold')) loads.push(leasehold);
    let leasehold3: CycleLoad | undefined;
    if (sideWanted(THREE)) {
      stack3 = await startStack({
        name: 'cycle3',
        etcd: o.etcd,
        sessionTtlMs: 10_000,
        heartbeatIntervalMs: 2_500,
        coordinators: 3,
      });
      admin3 = new Admin(stack3.coordinator.url, stack3.keys.adminKey);
      leasehold3 = leaseholdCycle(stack3, admin3, o.etcd, THREE);
      loads.push(leasehold3);
    }
    if (findRedis() === undefined) {
      o.log('cycle: redis-server not found: the BullMQ sides are skipped');
    } else {
      for (const fsync of ['always', 'everysec'] as const) {
        if (!sideWanted(`bullmq-${fsync}`)) continue;
        const redis = await startRedis(fsync);
        redises.push(redis);
        const queue = new Queue(`bench-${fsync}`, {
          connection: { host: '127.0.0.1', port: redis.port, maxRetriesPerRequest: null },
          defaultJobOptions: { removeOnComplete: true, removeOnFail: 1000 },
        });
        queues.push(queue);
        loads.push(bullmqCycle(`bullmq-${fsync}`, redis, queue));
      }
    }
    // Idle cost (see the head comment): the leasehold side and BullMQ `always`, one after the other,
    // before any round — after them, retention would still be removing the rounds' completed tasks.
    const idleLeasehold = sideWanted('leasehold') ? await measureIdle(leasehold, o.seconds) : undefined;
    const bullmqAlways = loads.find((l) => l.name === 'bullmq-always');
    const idleBullmq = bullmqAlways === undefined ? undefined : await measureIdle(bullmqAlways, o.seconds);
    const results = await interleaveLoads(o.rounds, loads, {
      seconds: o.seconds,
      maxWarmupSlices: o.maxWarmupSlices,
      log: o.log,
    });
    const get = (name: string): RoundResult[] => results.get(name) ?? [];
    const describe = (rs: readonly RoundResult[]) => {
      const parts = Object.keys(rs[0]?.cpuUs ?? {}).map(
        (k) => `${k} ${Math.round(median(rs.map((r) => r.cpuUs[k] ?? 0)))}`,
      );
      const clients = median(rs.map((r) => r.clientUs));
      const self = median(rs.map((r) => r.selfUs));
      return `${parts.join(', ')}, worker processes ${Math.round(clients - self)}, bench submitter ${Math.round(self)}`;
    };
    const errors = get('leasehold').reduce((a, r) => a + r.errors, 0) + leasehold.submitErrors;
    const errors3 = get(THREE).reduce((a, r) => a + r.errors, 0) + (leasehold3?.submitErrors ?? 0);
    const summaries = leasehold.workers.summaries.flat();
    const windowOps = summaries.reduce((a, s) => a + Number(s.windowOps ?? 0), 0);
    const perTask = (k: string) =>
      windowOps > 0 ? (summaries.reduce((a, s) => a + Number(s[k] ?? 0), 0) / windowOps).toFixed(2) : '?';
    const shape = `${CYCLE_WORKERS} worker processes × ${CYCLE_SLOTS} slots, batches of ≤ ${SUBMIT_BATCH}, backlog ≤ ${BACKLOG}`;
    const rows: BenchRow[] = [];
    if (get('bullmq-always').length > 0 && get('leasehold').length > 0) {
      rows.push(
        throughputRow({
          name: 'full task cycles/s (submit → grant → fenced write → complete) vs BullMQ, AOF always',
          unit: 'tasks/s',
          figure: get('leasehold'),
          base: get('bullmq-always'),
          baselineName: 'BullMQ no-op jobs, redis-server appendfsync always',
          cpu: 'total',
          target: 1.0,
          note:
            `${shape}; CPU µs per task (all processes; medians): leasehold ${describe(get('leasehold'))}; ` +
            `BullMQ always ${describe(get('bullmq-always'))}; WebSocket frames per leasehold task: ${perTask('framesOut')} ` +
            `worker → coordinator, ${perTask('framesIn')} back; ${describeCalls(leasehold.calls, windowOps)}; refused, lost or unsubmitted during leasehold rounds: ${errors}`,
        }),
      );
    }
    if (get('bullmq-everysec').length > 0 && get('leasehold').length > 0) {
      rows.push(
        throughputRow({
          name: 'full task cycles/s vs BullMQ, AOF everysec',
          unit: 'tasks/s',
          figure: get('leasehold'),
          base: get('bullmq-everysec'),
          baselineName: 'BullMQ no-op jobs, redis-server appendfsync everysec',
          cpu: 'total',
          note: `BullMQ everysec ${describe(get('bullmq-everysec'))}`,
        }),
      );
    }
    if (leasehold3 !== undefined && get(THREE).length > 0 && get('leasehold').length > 0) {
      const tasks3 = leasehold3.workers.summaries.flat().reduce((a, s) => a + Number(s.windowOps ?? 0), 0);
      rows.push(
        cpuRow({
          name: 'coordinator CPU per task cycle, 3 coordinators (summed) vs 1',
          figure: get(THREE),
          base: get('leasehold'),
          figureCpu: coordinatorCpu,
          baseCpu: coordinatorCpu,
          baselineName: 'the same cycle on one coordinator',
          target: 1.2,
          note:
            `workers spread over the three (worker i on coordinator i mod 3), submits through the first; ` +
            `${Math.round(median(get(THREE).map((r) => r.rate)))} tasks/s; CPU µs per task: ${describe(get(THREE))}; ` +
            `${describeCalls(leasehold3.calls, tasks3)}; refused, lost or unsubmitted: ${errors3}`,
        }),
      );
    }
    if (idleLeasehold !== undefined) {
      rows.push(
        limitRow({
          name: `idle cost: CPU ms per second with all ${CYCLE_WORKERS * CYCLE_SLOTS} slots waiting, nothing submitted`,
          value: idleLeasehold.total,
          unit: 'ms CPU/s',
          ...(idleBullmq === undefined
            ? {}
            : { baseline: idleBullmq.total, baselineName: 'BullMQ always, the same workers waiting' }),
          note:
            `${o.seconds} s once ${CYCLE_WORKERS} worker processes × ${CYCLE_SLOTS} slots had settled into waiting (two 1 s windows of the machine's busy CPU within a fifth, under a quarter of its cores) ` +
            `(the SDK's long polls, acquireWaitMs ${WORKER_DEFAULTS.acquireWaitMs} ms); leasehold ${describeIdle(idleLeasehold)}` +
            (idleBullmq === undefined ? '' : `; BullMQ always ${describeIdle(idleBullmq)}`),
          digits: 0,
        }),
      );
    }
    if (get('bullmq-always').length === 0 && get('leasehold').length > 0) {
      rows.push(
        throughputRow({
          name: 'full task cycles/s (submit → grant → fenced write → complete)',
          unit: 'tasks/s',
          figure: get('leasehold'),
          base: get('leasehold'),
          baselineName: 'itself (BullMQ skipped: no redis-server, or not among the sides asked for)',
          cpu: 'total',
          note:
            `${shape}; CPU µs per task: ${describe(get('leasehold'))}; WebSocket frames per task: ${perTask('framesOut')} ` +
            `worker → coordinator, ${perTask('framesIn')} back; ${describeCalls(leasehold.calls, windowOps)}`,
        }),
      );
    }
    return rows;
  } finally {
    for (const l of loads) await l.close();
    for (const q of queues) await q.close();
    for (const r of redises) await r.stop();
    await admin.close();
    await admin3?.close();
    await stack.stop();
    await stack3?.stop();
  }
}

/** µs of CPU per task of every coordinator process of a round (`coordinator`, `coordinator-2`, ...). */
export function coordinatorCpu(r: RoundResult): number {
  return Object.entries(r.cpuUs)
    .filter(([k]) => k === 'coordinator' || k.startsWith('coordinator-'))
    .reduce((a, [, v]) => a + v, 0);
}
