/**
 * Suite `takeover`: how fast a task moves on when its holder goes silent, measured under the
 * task-cycle load (the `cycle` suite's leasehold side — 8 SDK worker processes × 8 slots and the
 * bench's submitter — runs on the same coordinator, sink and etcd the whole time).
 *
 * The cycle's rate is measured alone first; then two phases, each its own driver process: the
 * cycle unpaced (its full rate), then its submits paced to half its maximum — the higher of the rate
 * alone and the rate it kept unpaced during the first phase — the phase the target (p99 ≤ 25 ms to
 * the new grant) is judged on, as issue 27 states it; the full rate is reported too.
 *
 * Coordinator session TTL 500 ms, heartbeats every 100 ms; per phase ≥ 1000 takeovers in waves of
 * 64 (plus one uncounted warm-up wave), driven by `procs/takeover-driver.ts` (method there). Rows
 * per phase: p50 / p99 / p999 from the holder's deadline to the new holder's grant, to its first
 * accepted write, to the holder's `session.expired`; over both: late writes of paused holders
 * accepted (must be 0), failed takeovers.
 */
import type { CycleLoad } from './cycle.js';
import { coordinatorCalls, leaseholdCycle } from './cycle.js';
import { NodeChild } from './infra/child.js';
import type { Etcd } from './infra/etcd.js';
import { cpuMs, runQueueWaitMs } from './infra/proc.js';
import { Admin } from './infra/raw-worker.js';
import { startStack, type Stack } from './infra/stack.js';
import { limitRow, percentile, type BenchRow } from './report.js';

export interface TakeoverOptions {
  readonly etcd: Etcd;
  readonly takeovers: number;
  /** How long the background cycle load runs before the first wave. */
  readonly settleMs: number;
  /** How long the background cycle's maximum rate is measured, alone, before the takeovers. */
  readonly rateWindowMs: number;
  readonly log: (line: string) => void;
}

const TTL_MS = 500;
const HEARTBEAT_MS = 100;
const WAVE = 64;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface PhaseResult {
  readonly res: Record<string, unknown>;
  /** Background cycle tasks completed per second over the phase. */
  readonly cycleRate: number;
  /** Each daemon's CPU and run-queue wait over the phase. */
  readonly sched: string;
  /** The coordinator's session-end calls over the phase (its /metrics, before and after). */
  readonly ends: string;
}

/** The coordinator's call counters (cycle.ts's coordinatorCalls), or {} when /metrics does not answer. */
async function callsOf(url: string): Promise<Record<string, number>> {
  return fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5_000) })
    .then(async (r) => coordinatorCalls(await r.text()))
    .catch(() => ({}));
}

/** Session-end txns per expired holder and sessions per group-committed end call, from two call counters. */
function describeEnds(before: Record<string, number>, after: Record<string, number>, holders: number): string {
  const d = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
  const txns = ['end_session', 'end_sessions', 'close_session'].map(
    (t) => `${t} ${(d(`txn:${t}`) / holders).toFixed(3)}`,
  );
  const calls = d('calls:end_session');
  const perCall = calls > 0 ? (d('items:end_session') / calls).toFixed(1) : '-';
  return `etcd session-end txns per expired holder: ${txns.join(', ')}; sessions per group-committed end call ${perCall}`;
}

/** One driver process's takeovers (see procs/takeover-driver.ts) while the background cycle runs. */
async function runPhase(stack: Stack, background: CycleLoad, takeovers: number, tag: string): Promise<PhaseResult> {
  const driver = new NodeChild('takeover-driver.js', `takeover-driver-${tag}`);
  try {
    const c0 = await background.sample();
    const t0 = performance.now();
    // Where the latency goes when no process is CPU-bound: each daemon's CPU use and the time its
    // main thread waited for a core over the takeover window (the cycle load runs meanwhile).
    const daemons = { coordinator: stack.coordinator.pid, sink: stack.sink.pid };
    const read = () =>
      Object.fromEntries(
        Object.entries(daemons).map(([k, pid]) => [k, { cpu: cpuMs(pid) ?? 0, wait: runQueueWaitMs(pid) ?? 0 }]),
      );
    const p0 = read();
    const calls0 = await callsOf(stack.coordinator.url);
    await driver.request(
      {
        type: 'start',
        coordinatorUrl: stack.coordinator.url,
        sinkUrl: stack.sink.url,
        workerKey: stack.keys.workerKey,
        adminKey: stack.keys.adminKey,
        takeovers,
        wave: WAVE,
        ttlMs: TTL_MS,
        heartbeatMs: HEARTBEAT_MS,
        tag,
      },
      'started',
      600_000,
    );
    const c1 = await background.sample();
    const windowS = (performance.now() - t0) / 1000;
    const p1 = read();
    const sched = Object.keys(daemons)
      .map((k) => {
        const d = (f: 'cpu' | 'wait') => ((p1[k]?.[f] ?? 0) - (p0[k]?.[f] ?? 0)) / windowS;
        return `${k} ${Math.round(d('cpu'))} ms CPU/s, main thread waited for a core ${Math.round(d('wait'))} ms/s`;
      })
      .join('; ');
    // Every holder's session ends, the uncounted warm-up wave's too.
    const ends = describeEnds(calls0, await callsOf(stack.coordinator.url), takeovers + WAVE);
    const res = await driver.request({ type: 'stop' }, 'stopped');
    return { res, cycleRate: (c1.ops - c0.ops) / windowS, sched, ends };
  } finally {
    await driver.kill();
  }
}

const sortedOf = (res: Record<string, unknown>, k: string) =>
  [...((res[k] as number[] | undefined) ?? [])].sort((a, b) => a - b);
const pp = (xs: readonly number[]) =>
  `p50 ${percentile(xs, 50).toFixed(1)}, p99 ${percentile(xs, 99).toFixed(1)}, p999 ${percentile(xs, 99.9).toFixed(1)} ms`;

/** The latency rows of one phase; `limit` is set on the phase the target is judged on. */
function latencyRows(label: string, phase: PhaseResult, setup: string, limit: number | undefined): BenchRow[] {
  const g = sortedOf(phase.res, 'toGrant');
  const w = sortedOf(phase.res, 'toWrite');
  const x = sortedOf(phase.res, 'toExpired');
  const r = phase.res;
  // A phase that counted nothing must not print a p99 of 0 that "meets" the target.
  if (g.length === 0) throw new Error(`takeover ${label}: no takeover counted (${JSON.stringify(r).slice(0, 300)})`);
  const note =
    `${g.length} takeovers in waves of ${WAVE}, TTL ${TTL_MS} ms, heartbeat ${HEARTBEAT_MS} ms, taker long-polls; ` +
    `${setup} (${Math.round(phase.cycleRate)} tasks/s completed meanwhile by 8 SDK worker processes); ${pp(g)}` +
    `; each wave's slowest, in order: ${((r.waveWorst as number[] | undefined) ?? []).map((x) => Math.round(x)).join(', ')} ms` +
    `; during the takeovers: ${phase.sched}; ${phase.ends}` +
    `; holders that never got their grant (left out): ${Number(r.holderSetupFailed ?? 0)}; taker sessions that expired (reopened): ${Number(r.takerSessionsLost ?? 0)}${typeof r.holderReply === 'string' && r.holderReply !== '' ? ` (${r.holderReply})` : ''}`;
  const p50 = { baselineName: 'p50 of the same', unit: 'ms' };
  return [
    limitRow({
      name: `takeover ${label}: holder deadline → new holder granted, p99`,
      value: percentile(g, 99),
      ...(limit !== undefined ? { limit } : {}),
      baseline: percentile(g, 50),
      ...p50,
      note,
    }),
    limitRow({
      name: `takeover ${label}: holder deadline → new holder granted, p999`,
      value: percentile(g, 99.9),
      baseline: percentile(g, 50),
      ...p50,
    }),
    limitRow({
      name: `takeover ${label}: holder deadline → new holder first write accepted, p99`,
      value: percentile(w, 99),
      baseline: percentile(w, 50),
      ...p50,
      note: pp(w),
    }),
    limitRow({
      name: `takeover ${label}: holder deadline → holder told session.expired, p99`,
      value: percentile(x, 99),
      baseline: percentile(x, 50),
      ...p50,
      note: `${pp(x)}; expiry judged, owner keys deleted in etcd, pushed, then the lease revoked`,
    }),
  ];
}

export async function runTakeoverBench(o: TakeoverOptions): Promise<BenchRow[]> {
  const stack = await startStack({
    name: 'takeover',
    etcd: o.etcd,
    sessionTtlMs: TTL_MS,
    heartbeatIntervalMs: HEARTBEAT_MS,
    // A lost attempt waits for its retry backoff before the task is grantable again (default 1 s,
    // a policy choice); the takeover figure measures the mechanism, so tasks retry at once.
    coordinatorEnv: { LEASEHOLD_COORDINATOR_RETRY_INITIAL_MS: '0' },
  });
  const admin = new Admin(stack.coordinator.url, stack.keys.adminKey);
  let background: CycleLoad | undefined;
  try {
    background = leaseholdCycle(stack, admin, o.etcd, 'background');
    await background.start(1);
    await sleep(o.settleMs);
    // The cycle's maximum rate on this stack, alone: the target is judged at half of it.
    const m0 = await background.sample();
    const tm = performance.now();
    await sleep(o.rateWindowMs);
    const m1 = await background.sample();
    const aloneRate = (m1.ops - m0.ops) / ((performance.now() - tm) / 1000);
    o.log(`takeover: background cycle alone ${Math.round(aloneRate)} tasks/s`);
    const full = await runPhase(stack, background, o.takeovers, 'full-');
    o.log(
      `takeover at the full cycle rate: ${sortedOf(full.res, 'toGrant').length} takeovers; to grant ${pp(sortedOf(full.res, 'toGrant'))}; background ${Math.round(full.cycleRate)} tasks/s; ${full.sched}`,
    );
    // The short window alone comes a few seconds after the start, before the processes have warmed
    // up: the unpaced cycle then ran faster during the full-rate phase in each of six runs (by 3–26
    // %, takeovers and all). The maximum is the higher of the two, so "half" is not 40 % of it.
    const maxRate = Math.max(aloneRate, full.cycleRate);
    // Half the maximum: submits paced, the backlog left from the full rate drained first.
    background.limitRate(maxRate / 2);
    await sleep(o.settleMs);
    const half = await runPhase(stack, background, o.takeovers, 'half-');
    o.log(
      `takeover at half the cycle rate: ${sortedOf(half.res, 'toGrant').length} takeovers; to grant ${pp(sortedOf(half.res, 'toGrant'))}; background ${Math.round(half.cycleRate)} tasks/s; ${half.sched}`,
    );
    await background.stop();
    const both = (k: string) => Number(full.res[k] ?? 0) + Number(half.res[k] ?? 0);
    const takerReply = [full.res.takerReply, half.res.takerReply].find((t) => typeof t === 'string' && t !== '');
    return [
      ...latencyRows(
        'at half the cycle rate',
        half,
        `the cycle's submits paced to half its maximum rate (${Math.round(maxRate)} tasks/s, the higher of ${Math.round(aloneRate)} alone and ${Math.round(full.cycleRate)} unpaced during the full-rate takeovers)`,
        25,
      ),
      ...latencyRows('under the full cycle load', full, 'the cycle unpaced', undefined),
      limitRow({
        name: 'takeover: late writes of paused holders accepted',
        value: both('staleAccepted'),
        unit: 'writes',
        limit: 0,
        digits: 0,
        note: 'both phases',
      }),
      limitRow({
        name: 'takeover: failed takeovers',
        value: both('failed'),
        unit: 'takeovers',
        limit: 0,
        digits: 0,
        note: `both phases; no grant within 5 s of the deadline, or the first write refused${typeof takerReply === 'string' ? `; a taker was answered ${takerReply}` : ''}`,
      }),
    ];
  } finally {
    if (background !== undefined) await background.close();
    await admin.close();
    await stack.stop();
  }
}
