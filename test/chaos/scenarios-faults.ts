/**
 * Scenarios for the wider nemesis: the register workload (lost updates), a grant burst while the
 * etcd leader is cut off and the coordinators are stopped and killed, the sink's disk filling up,
 * and clock jumps under a pausing workload (lease lifetimes against the monotonic bound).
 */
import { LeaseholdError } from '@leasehold/protocol';
import { checkLeaseBounds } from './checker-leases.js';
import { checkRegister } from './checker-register.js';
import type { Violation } from './violation.js';
import { nowMs, runNemesis, startNemesis } from './nemesis.js';
import { expectation, runMix, sleep, task, type Scenario, type ScenarioContext } from './scenarios.js';
import { buildTasks } from './workload.js';

/** Submit these at once (concurrently); resolves when every submit got a definite answer. */
async function burst(ctx: ScenarioContext, ids: readonly string[], resources: number): Promise<void> {
  await Promise.all(ids.map((id, i) => ctx.workload.submit(task(ctx, id, `burst/${i % resources}`))));
}

/** Poll `probe` until it returns a value (not undefined) or `timeoutMs` passes. */
async function until<T>(timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T | undefined> {
  const deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    const v = await probe();
    if (v !== undefined) return v;
    await sleep(100);
  }
  return undefined;
}

export const FAULT_SCENARIOS: readonly Scenario[] = [
  {
    name: 'register',
    target: true,
    description:
      "The register workload under the seeded random mix: every task reads its resource's value at the sink and writes value + 1 under its token (few resources, many pauses past the lease). The checker counts lost updates: 0 with fencing; with --sabotage skip-fence a stale holder's increment lands on top of a newer one.",
    async run(ctx) {
      const s = ctx.settings;
      await runMix(
        ctx,
        buildTasks(ctx.rng.fork(1), {
          tasks: s.tasks,
          resources: Math.min(s.resources, 4),
          pauseRate: Math.max(s.pauseRate, 0.3),
          pauseMinMs: Math.round(s.sessionTtlMs * 1.5),
          pauseMaxMs: Math.round(s.sessionTtlMs * 2.5),
          taskPrefix: `reg-${s.seed}`,
          resourcePrefix: 'reg/',
          register: true,
        }),
      );
    },
    expect(h) {
      const stats = checkRegister(h).stats;
      if (stats === undefined || stats.acceptedWrites === 0) return [expectation('no register write was accepted')];
      return [];
    },
  },
  {
    name: 'grant-burst-leader-isolated',
    description:
      'A 3-member etcd: the leader is cut off (nftables partition with --network netns, else its inbound peer proxy blackholed) while 40 tasks arrive at once; mid-burst coordinator-0 is SIGSTOPped and coordinator-1 SIGKILLed (and restarted). Then everything heals; every task completes, nothing stale lands.',
    cluster: { etcdMembers: 3 },
    async run(ctx) {
      const warm = Array.from({ length: 8 }, (_, i) => `warm-${i}`);
      await burst(ctx, warm, 6);
      await ctx.workload.waitCompleted(undefined, 30_000);
      ctx.notes.leaderBefore = (await ctx.cluster.etcdLeader()) ?? null;
      const via = ctx.cluster.network.capabilities.nft ? 'nft' : 'proxy';
      const healPartition = await startNemesis(ctx.cluster, ctx.faults, {
        kind: 'partition',
        member: 'etcd-leader',
        withCoordinator: false,
        direction: 'both',
        via,
      });
      try {
        const submits = burst(
          ctx,
          Array.from({ length: 40 }, (_, i) => `burst-${i}`),
          12,
        );
        await sleep(300);
        await Promise.all([
          runNemesis(ctx.cluster, ctx.faults, { kind: 'pause', process: 'coordinator-0' }, 3_000),
          (async () => {
            await sleep(800);
            await runNemesis(ctx.cluster, ctx.faults, { kind: 'kill', process: 'coordinator-1' }, 1_500);
          })(),
        ]);
        ctx.notes.leaderDuring = (await ctx.cluster.etcdLeader()) ?? null;
        await submits;
      } finally {
        await healPartition();
      }
    },
    expect(_h, notes) {
      return notes.leaderBefore === null ? [expectation('no etcd leader before the partition')] : [];
    },
  },
  {
    name: 'sink-disk-full',
    description:
      "The SQLite sink's data directory is a 32 MiB tmpfs (root only). Under load it is filled to the last byte: the sink must refuse with 503 (UNAVAILABLE), lose no acknowledged write and not crash; once the space is back it must accept again and every task completes.",
    cluster: { smallDiskBytes: 32 * 1024 * 1024, needsRoot: 'mounts a tmpfs' },
    async run(ctx) {
      const before = Array.from({ length: 12 }, (_, i) => `pre-${i}`);
      await burst(ctx, before, 6);
      await ctx.workload.waitCompleted(undefined, 30_000);
      const heal = await startNemesis(ctx.cluster, ctx.faults, { kind: 'disk-full', process: 'sink' });
      const statuses: Record<string, number> = {};
      let n = 0;
      try {
        const during = burst(
          ctx,
          Array.from({ length: 12 }, (_, i) => `full-${i}`),
          6,
        );
        // Probe with fence advances on fresh resources (new rows, new pages) until one is refused.
        const refused = await until(20_000, async () => {
          const items = Array.from({ length: 200 }, () => ({ resource: `disk-probe/${n++}`, token: 1n }));
          try {
            await ctx.cluster.sinkClient.advanceBatch(items);
            statuses.accepted = (statuses.accepted ?? 0) + 1;
            return undefined;
          } catch (err) {
            const code = err instanceof LeaseholdError ? err.code : 'transport';
            statuses[code] = (statuses[code] ?? 0) + 1;
            return code;
          }
        });
        ctx.notes.refusedWith = refused ?? null;
        const ready = await fetch(`${ctx.cluster.sink.url}/readyz`)
          .then((r) => r.status)
          .catch(() => 0);
        ctx.notes.readyzWhileFull = ready;
        await sleep(1_000);
        await heal();
        const recovered = await until(20_000, async () => {
          try {
            await ctx.cluster.sinkClient.advance(`disk-probe/${n++}`, 1n);
            return nowMs();
          } catch {
            return undefined;
          }
        });
        ctx.notes.recovered = recovered !== undefined;
        await during;
      } finally {
        await heal();
        ctx.notes.statuses = statuses;
      }
    },
    expect(_h, notes) {
      const out: Violation[] = [];
      if (notes.refusedWith !== 'UNAVAILABLE')
        out.push(
          expectation(
            `the full disk was not answered with 503 UNAVAILABLE (first refusal: ${String(notes.refusedWith)}; ${JSON.stringify(notes.statuses)})`,
          ),
        );
      if (notes.recovered !== true)
        out.push(expectation('the sink did not accept writes again once the space was back'));
      return out;
    },
  },
  {
    name: 'clock-skew',
    description:
      'The coordinators run under libfaketime with a standing skew between them; every ~5 s one of them jumps its wall clock forward or backward by 5–300 s, while a third of the tasks stop their worker past the lease. Lease lifetimes (live etcd watch) must stay within the monotonic bound: no lease-outlived-bound, no lease-cut-short.',
    cluster: { clock: true },
    async run(ctx) {
      const s = ctx.settings;
      await runMix(
        ctx,
        buildTasks(ctx.rng.fork(1), {
          tasks: s.tasks,
          resources: s.resources,
          pauseRate: Math.max(s.pauseRate, 0.35),
          pauseMinMs: Math.round(s.sessionTtlMs * 1.5),
          pauseMaxMs: Math.round(s.sessionTtlMs * 2.5),
          taskPrefix: `clock-${s.seed}`,
        }),
        { clock: true, processes: false, proxy: false, nft: false },
      );
    },
    expect(h) {
      const stats = checkLeaseBounds(h).stats;
      return stats.silentHolders === 0 && stats.sessionEnds === 0
        ? [expectation(`no lease was judged against the bound (${JSON.stringify(stats)})`)]
        : [];
    },
  },
];
