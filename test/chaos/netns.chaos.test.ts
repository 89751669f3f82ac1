/**
 * Real network faults (root): each process in its own network namespace, links cut by nftables.
 * Skipped, with the reason printed, where namespaces cannot be made (not root, no `ip netns`, no
 * nftables). Three parts:
 *
 * - what the kernel does with each fault between two namespaces (drop: the connect times out;
 *   reject: RST at once; one way: the SYN never arrives; healed: it connects again);
 * - that a run's namespaces, veths and nftables tables are gone after destroy, and after the
 *   process that made them dies of SIGTERM;
 * - the short netns profile: 3-member etcd, nftables faults and partitions (an etcd member with the
 *   coordinator next to it, asymmetric ones too), clock jumps of the coordinators, kills and
 *   pauses; 40 s of faults; must find 0 violations. Seed: LEASEHOLD_CHAOS_NETNS_SEED (default 20,
 *   whose schedule has every kind: kill, pause, partition with a coordinator, drop, one-way, RST,
 *   clock).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { NETNS_PREFIX, NetnsLab, NftFaults, probeNetns } from '@leasehold/devkit';
import { nftRulesFor, type NftFault } from '../harness/chaos-network.js';
import { REPO_ROOT, waitFor } from '../harness/service.js';
import { findProfile } from './profiles.js';
import { runChaos } from './runner.js';

const support = probeNetns();
if (!support.ok) process.stderr.write(`[chaos netns] skipped: ${support.reason ?? 'unavailable'}\n`);

/** Connect from inside `ns` to ip:port; resolves 'ok', 'refused/reset' or 'timeout'. */
function dialFrom(ns: string, ip: string, port: number, timeoutMs = 700): Promise<string> {
  const script = `const s=require("net").connect(${port},"${ip}");s.setTimeout(${timeoutMs},()=>{console.log("timeout");process.exit(0)});s.on("data",()=>{console.log("ok");process.exit(0)});s.on("error",(e)=>{console.log(e.code==="ECONNREFUSED"||e.code==="ECONNRESET"?"refused/reset":e.code);process.exit(0)})`;
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', script], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', () => {
      resolve(out.trim());
    });
  });
}

function namespacesOf(runId: string): Promise<string[]> {
  return new Promise((resolve) => {
    const child = spawn('ip', ['netns', 'list'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('exit', () => {
      resolve(
        out
          .split('\n')
          .map((l) => l.split(' ')[0] ?? '')
          .filter((n) => n.startsWith(`${NETNS_PREFIX}${runId}-`)),
      );
    });
  });
}

describe.skipIf(!support.ok)('chaos: network namespaces and nftables', () => {
  it(
    'drop times out, reject resets, one way stops the SYN, heal restores; destroy leaves nothing',
    { timeout: 60_000 },
    async () => {
      const lab = NetnsLab.create();
      let srv: ChildProcess | undefined;
      const nft = new NftFaults();
      try {
        const a = lab.addHost('a', 'a');
        const b = lab.addHost('b', 'b');
        const server = spawn(b.launcher[0]!, [...b.launcher.slice(1), process.execPath, '-e', `require("net").createServer((s)=>s.end("hi")).listen(7000,"${b.ip}",()=>console.log("up"))`], { stdio: ['ignore', 'pipe', 'ignore'] }); // prettier-ignore
        srv = server;
        await new Promise((r) => server.stdout.once('data', r));
        // The host (runner) reaches every namespace through the hub.
        const fromHost = await new Promise<string>((resolve) => {
          const s = connect(7000, b.ip);
          s.on('data', () => {
            s.destroy();
            resolve('ok');
          });
          s.on('error', (e) => {
            resolve(e.message);
          });
        });
        expect(fromHost).toBe('ok');
        const endpoint = { ns: a.ns, ip: b.ip, port: 7000 };
        const under = async (fault: NftFault): Promise<string> => {
          const id = await nft.add(nftRulesFor(endpoint, fault as Exclude<NftFault, { kind: 'delay' }>));
          try {
            return await dialFrom(a.ns, b.ip, 7000);
          } finally {
            await nft.remove(id);
          }
        };
        expect(await dialFrom(a.ns, b.ip, 7000)).toBe('ok');
        expect(await under({ kind: 'drop' })).toBe('timeout');
        expect(await under({ kind: 'reject' })).toBe('refused/reset');
        expect(await under({ kind: 'one-way', direction: 'to-target' })).toBe('timeout');
        expect(await under({ kind: 'one-way', direction: 'to-client' })).toBe('timeout');
        expect(nft.activeRules).toBe(0);
        expect(await dialFrom(a.ns, b.ip, 7000)).toBe('ok');
        expect((await namespacesOf(lab.runId)).sort()).toEqual([a.ns, b.ns, `${NETNS_PREFIX}${lab.runId}-hub`].sort());
      } finally {
        srv?.kill('SIGKILL');
        lab.destroy();
      }
      expect(await namespacesOf(lab.runId)).toEqual([]);
      expect(existsSync(`/run/leasehold-chaos/net-${lab.subnet.split('.')[2]}.lock`)).toBe(false);
    },
  );

  it('a process that dies of SIGTERM takes its namespaces with it', { timeout: 30_000 }, async () => {
    const devkit = join(REPO_ROOT, 'packages/devkit/dist/index.js');
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { NetnsLab } = await import(${JSON.stringify(devkit)}); const lab = NetnsLab.create(); lab.addHost('x', 'x'); console.log(lab.runId); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const runId = await new Promise<string>((resolve) =>
      child.stdout.once('data', (d: Buffer) => {
        resolve(d.toString().trim());
      }),
    );
    expect(await namespacesOf(runId)).toHaveLength(2);
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
    await waitFor(
      'the namespaces to go',
      async () => ((await namespacesOf(runId)).length === 0 ? true : undefined),
      5_000,
    );
  });

  it(
    'short netns profile: nftables faults, partitions and clock jumps on a 3-member etcd, 0 violations',
    { timeout: 240_000 },
    async () => {
      const seed = Number(process.env.LEASEHOLD_CHAOS_NETNS_SEED ?? '20');
      const summary = await runChaos({ ...findProfile('netns-short').options, seed, profile: 'netns-short' });
      process.stderr.write(`${summary.files.summary}\n`);
      expect(summary.skipped).toBeUndefined();
      expect(summary.error, summary.error).toBeUndefined();
      expect(summary.violations).toEqual([]);
      expect(summary.tasks.completed).toBe(summary.tasks.submitted);
      expect(summary.environment).toMatchObject({ network: 'netns', clock: true, capabilities: { nft: true } });
      const kinds = Object.keys(summary.faults);
      expect(kinds).toEqual(expect.arrayContaining(['partition', 'clock-jump']));
      expect(kinds.some((k) => k.startsWith('nft-'))).toBe(true);
      // Lease lifetimes were measured and judged against the monotonic bound.
      expect(summary.leaseBounds?.judged).toBeGreaterThan(0);
    },
  );
});
