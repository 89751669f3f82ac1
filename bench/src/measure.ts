/**
 * How every throughput figure is measured: a `Load` (load generators and workers in their own
 * processes, servers in theirs) runs in interleaved rounds with its baselines (A, B, C, A, B, C, …).
 * Each round:
 *   1. start the load;
 *   2. warm up in 1 s slices and discard them until the rate is steady (two consecutive slices within
 *      10 % of each other; at most `maxWarmupSlices`, and the round says when it never got there) —
 *      in the first round of a side, or in every round when its clients are fresh processes;
 *      otherwise a 1 s lead-in;
 *   3. the measured window: the load's cumulative counters and /proc CPU of every process involved
 *      are read at its start and end, together with the CPU used by processes outside the bench;
 *   4. stop the load.
 * CPU per operation is per named process (the side's `counted` processes: its servers, plus the
 * client where a baseline's client is part of what it costs) and for the clients (load generators,
 * workers, and the bench process when it submits).
 */
import { cpuMs, foreignCpuWindow } from './infra/proc.js';
import type { Counters } from './procs/protocol.js';

export interface Load {
  readonly name: string;
  /** The processes whose CPU is this side's cost: name → pid (e.g. coordinator, etcd, sink). */
  counted(): Readonly<Record<string, number>>;
  /** Client processes (load generators, workers): reported, not part of `counted`. */
  clients(): readonly number[];
  /** The bench process does client work (submits tasks) during the window. */
  readonly selfIsClient?: boolean;
  /** Warm-up check in every round (fresh client processes per round) instead of the first only. */
  readonly warmEveryRound?: boolean;
  start(round: number): Promise<void>;
  sample(mark?: 'begin' | 'end'): Promise<Counters>;
  stop(): Promise<Record<string, unknown>>;
}

export interface RoundResult {
  readonly ops: number;
  readonly errors: number;
  readonly seconds: number;
  readonly rate: number;
  /** µs of CPU per operation of each counted process. */
  readonly cpuUs: Readonly<Record<string, number>>;
  /** Sum of `cpuUs`. */
  readonly countedUs: number;
  /** µs of CPU per operation of the clients (client processes + the bench process when it submits). */
  readonly clientUs: number;
  /** The bench process' part of `clientUs`. */
  readonly selfUs: number;
  /** Cores used by processes outside the bench during the window. */
  readonly foreignCores: number;
  readonly warmupSlices: number;
  readonly steady: boolean;
  readonly summary: Record<string, unknown>;
}

export interface MeasureOptions {
  readonly seconds: number;
  readonly maxWarmupSlices: number;
  readonly log: (line: string) => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function warmUp(load: Load, check: boolean, max: number): Promise<{ slices: number; steady: boolean }> {
  let prev = await load.sample();
  let prevRate = -1;
  for (let slice = 1; ; slice += 1) {
    const t0 = performance.now();
    await sleep(1_000);
    const cur = await load.sample();
    const rate = (cur.ops - prev.ops) / ((performance.now() - t0) / 1000);
    prev = cur;
    if (!check) return { slices: slice, steady: true };
    if (slice >= 2 && rate > 0 && Math.abs(rate - prevRate) <= 0.1 * Math.max(rate, prevRate)) {
      return { slices: slice, steady: true };
    }
    if (slice >= max) return { slices: slice, steady: false };
    prevRate = rate;
  }
}

export async function measureRound(load: Load, round: number, o: MeasureOptions): Promise<RoundResult> {
  await load.start(round);
  const warm = await warmUp(load, round === 1 || load.warmEveryRound === true, o.maxWarmupSlices);
  const counted = load.counted();
  const names = Object.keys(counted);
  const clients = load.clients();
  const read = () => ({
    counted: names.map((n) => cpuMs(counted[n] ?? 0) ?? 0),
    clients: clients.reduce((a, p) => a + (cpuMs(p) ?? 0), 0),
    self: process.cpuUsage(),
  });
  const foreign = foreignCpuWindow();
  const c0 = read();
  const s0 = await load.sample('begin');
  const t0 = performance.now();
  await sleep(o.seconds * 1000);
  const s1 = await load.sample('end');
  const seconds = (performance.now() - t0) / 1000;
  const c1 = read();
  const foreignCores = foreign.end();
  const summary = await load.stop();
  const ops = s1.ops - s0.ops;
  const per = (ms: number) => (ops > 0 ? (ms * 1000) / ops : 0);
  const cpuUs: Record<string, number> = {};
  names.forEach((n, i) => {
    cpuUs[n] = per((c1.counted[i] ?? 0) - (c0.counted[i] ?? 0));
  });
  const self = load.selfIsClient === true ? process.cpuUsage(c0.self) : { user: 0, system: 0 };
  const clientUs = per(c1.clients - c0.clients + (self.user + self.system) / 1000);
  const result: RoundResult = {
    ops,
    errors: s1.errors - s0.errors,
    seconds,
    rate: ops / seconds,
    cpuUs,
    countedUs: Object.values(cpuUs).reduce((a, b) => a + b, 0),
    clientUs,
    selfUs: per((self.user + self.system) / 1000),
    foreignCores,
    warmupSlices: warm.slices,
    steady: warm.steady,
    summary,
  };
  o.log(
    `round ${round} ${load.name}: ${Math.round(result.rate)}/s${result.errors > 0 ? ` (${result.errors} errors)` : ''}, CPU µs/op ${Object.entries(
      cpuUs,
    )
      .map(([k, v]) => `${k} ${Math.round(v)}`)
      .join(' ')} clients ${Math.round(clientUs)}; warm-up ${warm.slices} s${warm.steady ? '' : ' (NOT steady)'}` +
      `; foreign ${foreignCores.toFixed(2)} cores` +
      (typeof summary.firstError === 'string' ? `; first error ${summary.firstError}` : ''),
  );
  return result;
}

/** `rounds` interleaved rounds of every side; `between` runs after each side's round, unmeasured. */
export async function interleaveLoads(
  rounds: number,
  sides: readonly Load[],
  o: MeasureOptions,
  between?: () => Promise<void>,
): Promise<Map<string, RoundResult[]>> {
  const out = new Map<string, RoundResult[]>(sides.map((s) => [s.name, []]));
  for (let r = 1; r <= rounds; r += 1) {
    for (const side of sides) {
      out.get(side.name)?.push(await measureRound(side, r, o));
      await between?.();
    }
  }
  return out;
}

// --- statistics -------------------------------------------------------------------------------

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
}

export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function spread(xs: readonly number[]): Spread {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

/** Per-round ratios a[i] / b[i] (rounds are paired by index). */
export function ratios(a: readonly number[], b: readonly number[]): number[] {
  return a.map((x, i) => {
    const y = b[i] ?? 0;
    return y > 0 ? x / y : 0;
  });
}

/** Pooled CPU µs per op over all rounds (weighted by each round's operations). */
export function pooled(results: readonly RoundResult[], pick: (r: RoundResult) => number): number {
  const ops = results.reduce((a, r) => a + r.ops, 0);
  return ops > 0 ? results.reduce((a, r) => a + pick(r) * r.ops, 0) / ops : 0;
}

/** Least-squares line y = a + b·x with the standard error of the slope. */
export function fitLine(
  xs: readonly number[],
  ys: readonly number[],
): { intercept: number; slope: number; slopeSe: number } {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxx = 0;
  let sxy = 0;
  xs.forEach((x, i) => {
    sxx += (x - mx) ** 2;
    sxy += (x - mx) * ((ys[i] ?? 0) - my);
  });
  const slope = sxx > 0 ? sxy / sxx : 0;
  const intercept = my - slope * mx;
  const sse = xs.reduce((a, x, i) => a + ((ys[i] ?? 0) - intercept - slope * x) ** 2, 0);
  const slopeSe = n > 2 && sxx > 0 ? Math.sqrt(sse / (n - 2) / sxx) : Number.NaN;
  return { intercept, slope, slopeSe };
}
