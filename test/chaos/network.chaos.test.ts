/**
 * The pure parts of the network faults: the nftables rule text, which rules a fault means on a link,
 * which links a partition cuts and in which direction, the link names of each network mode, and the
 * schedule's draw over the wider fault mix. No root, no processes.
 */
import { describe, expect, it } from 'vitest';
import { ruleLine, tableScript } from '@leasehold/devkit';
import { nftRulesFor, partitionCut } from '../harness/chaos-network.js';
import {
  crossingLinks,
  linkSpecs,
  processNames,
  shortName,
  sinkFor,
  type Topology,
} from '../harness/chaos-topology.js';
import { readProc } from './resources.js';
import { buildSchedule, describeNemesis, type FaultMix } from './schedule.js';

const base = { ns: 'lhc0001-w0', peerIp: '10.77.1.5', peerPort: 7400 } as const;

describe('nftables rules', () => {
  it('drop, reject (TCP RST) and loss, on output (destination) and input (source)', () => {
    expect(ruleLine({ ...base, chain: 'output', action: { kind: 'drop' } })).toBe(
      'add rule inet leasehold_chaos output ip daddr 10.77.1.5 tcp dport 7400 drop',
    );
    expect(ruleLine({ ...base, chain: 'input', action: { kind: 'reject' } })).toBe(
      'add rule inet leasehold_chaos input ip saddr 10.77.1.5 tcp sport 7400 tcp flags & rst == 0 reject with tcp reset',
    );
    expect(ruleLine({ ...base, chain: 'output', action: { kind: 'loss', percent: 25 } })).toBe(
      'add rule inet leasehold_chaos output ip daddr 10.77.1.5 tcp dport 7400 numgen random mod 100 < 25 drop',
    );
    // Without a port a reject still only answers TCP (and never a RST).
    expect(ruleLine({ ...base, peerPort: undefined, chain: 'output', action: { kind: 'reject' } })).toBe(
      'add rule inet leasehold_chaos output ip daddr 10.77.1.5 tcp flags & rst == 0 reject with tcp reset',
    );
    expect(() => ruleLine({ ...base, chain: 'output', action: { kind: 'loss', percent: 0 } })).toThrow(RangeError);
    expect(tableScript()).toMatch(/hook input priority 0; policy accept;[\s\S]*hook output priority 0; policy accept;/);
  });

  it('a link fault is rules in the client namespace: both ways, one way, RST both ways, loss both ways', () => {
    const e = { ns: 'n', ip: '10.77.1.9', port: 2379 };
    const shape = (f: Parameters<typeof nftRulesFor>[1]) =>
      nftRulesFor(e, f).map((r) => `${r.ns}:${r.chain}:${r.action.kind}:${r.peerIp}:${r.peerPort}`);
    expect(shape({ kind: 'drop' })).toEqual(['n:output:drop:10.77.1.9:2379', 'n:input:drop:10.77.1.9:2379']);
    expect(shape({ kind: 'one-way', direction: 'to-target' })).toEqual(['n:output:drop:10.77.1.9:2379']);
    expect(shape({ kind: 'one-way', direction: 'to-client' })).toEqual(['n:input:drop:10.77.1.9:2379']);
    expect(shape({ kind: 'reject' })).toEqual(['n:output:reject:10.77.1.9:2379', 'n:input:reject:10.77.1.9:2379']);
    expect(shape({ kind: 'loss', percent: 30 })).toEqual([
      'n:output:loss:10.77.1.9:2379',
      'n:input:loss:10.77.1.9:2379',
    ]);
  });
});

describe('topology', () => {
  const netns: Topology = { etcdMembers: 3, coordinators: 2, workers: 2, network: 'netns' };

  it('names links per network mode: proxied peer links, or one per ordered member pair', () => {
    const proxy = linkSpecs({ ...netns, network: 'proxy' });
    expect(proxy.filter((l) => l.name.startsWith('etcd-peer->')).map((l) => l.name)).toEqual([
      'etcd-peer->etcd-m0',
      'etcd-peer->etcd-m1',
      'etcd-peer->etcd-m2',
    ]);
    expect(proxy.every((l) => l.proxy && !l.nft)).toBe(true);
    const direct = linkSpecs(netns);
    expect(direct.filter((l) => /^etcd-m\d->etcd-m\d$/.test(l.name))).toHaveLength(6);
    expect(direct.every((l) => l.nft && !l.proxy)).toBe(true);
    // mixed: the workers' links have both, the rest only nftables.
    const mixed = linkSpecs({ ...netns, network: 'mixed' });
    expect(mixed.filter((l) => l.proxy).every((l) => l.client.startsWith('worker-') && l.nft)).toBe(true);
    expect(mixed.find((l) => l.name === 'coordinator-0->etcd-m1')).toMatchObject({ proxy: false, nft: true });
  });

  it('several sinks: replica i mod N for coordinator / worker i, and every sink links to PostgreSQL', () => {
    const t: Topology = { ...netns, workers: 3, sinks: 2, postgres: true };
    expect(processNames(t).sinks).toEqual(['sink-0', 'sink-1']);
    expect([0, 1, 2].map((i) => sinkFor(t, i))).toEqual(['sink-0', 'sink-1', 'sink-0']);
    const names = linkSpecs(t).map((l) => l.name);
    expect(names).toEqual(expect.arrayContaining(['worker-1->sink-1', 'coordinator-1->sink-1', 'sink-0->postgres']));
    expect(names).not.toContain('worker-1->sink-0');
    expect(['etcd-m2', 'sink', 'sink-1', 'coordinator-0', 'worker-13', 'postgres'].map(shortName)).toEqual([
      'e2',
      's',
      's1',
      'c0',
      'w13',
      'pg',
    ]);
  });

  it('a partition of an etcd member with its coordinator cuts exactly the links across', () => {
    const cut = crossingLinks(netns, ['etcd-m1', 'coordinator-1']).map((l) => l.name);
    expect(cut.sort()).toEqual(
      [
        'worker-0->coordinator-1',
        'worker-1->coordinator-1',
        'coordinator-0->etcd-m1',
        'coordinator-1->sink',
        'coordinator-1->etcd-m0',
        'coordinator-1->etcd-m2',
        'etcd-m0->etcd-m1',
        'etcd-m1->etcd-m0',
        'etcd-m1->etcd-m2',
        'etcd-m2->etcd-m1',
      ].sort(),
    );
    // With proxies only k's inbound peer proxy separates k (the others' carry the third member too).
    expect(crossingLinks({ ...netns, network: 'proxy' }, ['etcd-m1']).map((l) => l.name)).toEqual([
      'coordinator-0->etcd-m1',
      'coordinator-1->etcd-m1',
      'etcd-peer->etcd-m1',
    ]);
  });

  it('asymmetric partitions: inbound stops packets into the group, outbound packets out of it', () => {
    const group = new Set(['etcd-m1']);
    const outOfGroup = { name: 'etcd-m1->etcd-m0', client: 'etcd-m1', server: 'etcd-m0', proxy: false, nft: true };
    const intoGroup = { name: 'etcd-m0->etcd-m1', client: 'etcd-m0', server: 'etcd-m1', proxy: false, nft: true };
    expect(partitionCut(outOfGroup, group, 'inbound')).toBe('to-client');
    expect(partitionCut(intoGroup, group, 'inbound')).toBe('to-target');
    expect(partitionCut(outOfGroup, group, 'outbound')).toBe('to-target');
    expect(partitionCut(intoGroup, group, 'outbound')).toBe('to-client');
    expect(partitionCut(intoGroup, group, 'both')).toBe('both');
  });
});

describe('schedule over the wider fault mix', () => {
  const t: Topology = { etcdMembers: 3, coordinators: 2, workers: 4, network: 'netns' };
  const draw = (mix: FaultMix, topo = t) =>
    Array.from({ length: 40 }, (_, i) => buildSchedule({ seed: i + 1, durationMs: 60_000 }, topo, mix)).flat();

  it('draws every nftables fault, partitions of a member with and without its coordinator, in every direction, and clock jumps', () => {
    const steps = draw({ nft: true, clock: true });
    const seen = new Set(
      steps.map(({ nemesis: n }) =>
        n.kind === 'nft'
          ? `nft:${n.fault.kind}`
          : n.kind === 'partition'
            ? `partition:${n.withCoordinator}:${n.direction}`
            : n.kind,
      ),
    );
    for (const k of ['nft:drop', 'nft:one-way', 'nft:reject', 'nft:loss', 'clock', 'pause', 'kill'])
      expect(seen).toContain(k);
    for (const d of ['both', 'inbound', 'outbound'])
      for (const c of [true, false]) expect(seen).toContain(`partition:${c}:${d}`);
    expect(seen).not.toContain('nft:delay'); // no netem
    expect(seen).not.toContain('net'); // no proxies in netns mode
    const jumps = steps.flatMap((s) => (s.nemesis.kind === 'clock' ? [s.nemesis.jumpSeconds] : []));
    expect(Math.min(...jumps)).toBeLessThan(0);
    expect(Math.max(...jumps)).toBeGreaterThan(0);
    expect(steps.every((s) => describeNemesis(s.nemesis) !== '')).toBe(true);
  });

  it('delay only with netem; protected processes are never killed; an allow-list limits nftables links', () => {
    expect(
      draw({ nft: true, netem: true }).some((s) => s.nemesis.kind === 'nft' && s.nemesis.fault.kind === 'delay'),
    ).toBe(true);
    const protect = ['etcd-m0', 'sink', 'coordinator-0', 'worker-0'];
    const steps = draw({ nft: true, protect });
    expect(
      steps.filter((s) => s.nemesis.kind === 'kill').map((s) => (s.nemesis as { process: string }).process),
    ).not.toEqual(expect.arrayContaining(['etcd-m0']));
    for (const s of steps) if (s.nemesis.kind === 'kill') expect(protect).not.toContain(s.nemesis.process);
    expect(steps.some((s) => s.nemesis.kind === 'kill' && s.nemesis.process === 'etcd-leader')).toBe(false);
    const only = ['worker-0->sink', 'coordinator-1->etcd-m2'];
    for (const s of draw({ nft: true, nftLinks: only }))
      if (s.nemesis.kind === 'nft') for (const l of s.nemesis.links) expect(only).toContain(l);
  });

  it('clock-only mix (the clock-skew scenario): nothing but clock jumps', () => {
    const steps = draw({ clock: true, processes: false, proxy: false, nft: false });
    expect(new Set(steps.map((s) => s.nemesis.kind))).toEqual(new Set(['clock']));
  });

  it('the default mix (proxies only) draws the same schedule as before the wider mix existed', () => {
    // Seed 7, 3-member etcd: what the schedule of the long runs of record (docs/chaos.md) drew.
    const steps = buildSchedule({ seed: 7, durationMs: 30_000 }, { etcdMembers: 3, coordinators: 2, workers: 4 });
    expect(steps.map((s) => `${s.atMs}/${s.durationMs}/${describeNemesis(s.nemesis)}`)).toEqual([
      '209/3405/one-way to-target around worker-0 on 3 links',
      '4114/3213/blackhole around coordinator-0 on 8 links',
      '8464/3074/pause sink',
      '14124/3139/kill worker-3 (restart after)',
      '18607/3869/pause etcd-m1',
      '22976/2164/reset on worker-0->coordinator-1',
    ]);
  });
});

describe('resource samples', () => {
  it('reads RSS and open fds of a live pid from /proc, nothing for a dead one', () => {
    const me = readProc(process.pid);
    if (process.platform !== 'linux') return;
    expect(me?.rssKb).toBeGreaterThan(1_000);
    expect(me?.fds).toBeGreaterThan(2);
    expect(readProc(2 ** 22 + 12_345)).toBeUndefined();
  });
});
