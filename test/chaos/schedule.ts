/**
 * The fault schedule: a pure, seeded, replayable list of nemesis steps over a cluster topology.
 * Same seed + same options = same schedule (no Math.random, no clock).
 *
 * Targets are symbolic: processes `etcd-m0`, `etcd-leader` (resolved when the step runs), `sink`,
 * `coordinator-0`, `worker-3`; links `worker-3->sink`, `worker-3->coordinator-1`,
 * `coordinator-0->sink`, `coordinator-0->etcd-m2`, `etcd-peer->etcd-m1` (every peer connection into
 * that member).
 */
import { Prng } from './prng.js';
import type { ProxyMode } from '../harness/fault-proxy.js';
import type { NftFault, PartitionDirection } from '../harness/chaos-network.js';
import { linkSpecs, processNames, type Topology } from '../harness/chaos-topology.js';

export { linkNames, processNames, type Topology } from '../harness/chaos-topology.js';

/** Which fault mechanisms a run has (beyond pause and kill, which every run has). */
export interface FaultMix {
  /** Pauses and kills (default true). */
  readonly processes?: boolean;
  /** Userspace proxy faults on the links that have proxies. Default: true when any link has one. */
  readonly proxy?: boolean;
  /** nftables faults and partitions (network namespaces). */
  readonly nft?: boolean;
  /** Delay faults (tc netem; only where the kernel has it). */
  readonly netem?: boolean;
  /** Clock jumps of the coordinators (libfaketime). */
  readonly clock?: boolean;
  /** Disk-full of the SQLite sink (a small tmpfs). */
  readonly disk?: boolean;
  /** Processes never killed (paused and cut off, though): their resource samples span the run. */
  readonly protect?: readonly string[];
  /** Only these links may get nftables faults (a target file's links); default: every link that has them. */
  readonly nftLinks?: readonly string[];
}

export type Nemesis =
  | { readonly kind: 'pause'; readonly process: string }
  | { readonly kind: 'kill'; readonly process: string }
  /** Userspace proxies of these links in a mode. */
  | { readonly kind: 'net'; readonly links: readonly string[]; readonly mode: ProxyMode; readonly label: string }
  /** nftables rules (or netem) on these links, in the clients' namespaces. */
  | { readonly kind: 'nft'; readonly links: readonly string[]; readonly fault: NftFault; readonly label: string }
  /**
   * Cut an etcd member (`etcd-mk` or `etcd-leader`, resolved when the fault starts), with the
   * coordinator next to it (coordinator-k) if asked, off from everything else.
   */
  | {
      readonly kind: 'partition';
      readonly member: string;
      readonly withCoordinator: boolean;
      readonly direction: PartitionDirection;
      readonly via: 'nft' | 'proxy';
    }
  /** A coordinator's wall clock jumps by this much (from its standing skew) for the window. */
  | { readonly kind: 'clock'; readonly process: string; readonly jumpSeconds: number }
  /** The SQLite sink's file system is full for the window. */
  | { readonly kind: 'disk-full'; readonly process: string };

export interface ScheduleStep {
  /** Offset from the start of the fault phase. */
  readonly atMs: number;
  readonly durationMs: number;
  readonly nemesis: Nemesis;
}

export interface ScheduleOptions {
  readonly seed: number;
  /** Length of the fault phase. */
  readonly durationMs: number;
  /** Mean time between fault starts (default 5000). */
  readonly intervalMs?: number;
  /** Fault length range (default 1000–5000), capped to leave a gap before the next fault. */
  readonly minFaultMs?: number;
  readonly maxFaultMs?: number;
}

function netMode(rng: Prng): { mode: ProxyMode; label: string } {
  const kind = rng.weighted<'blackhole' | 'one-way' | 'reset' | 'latency'>([
    ['blackhole', 4],
    ['one-way', 2],
    ['reset', 2],
    ['latency', 2],
  ]);
  switch (kind) {
    case 'blackhole':
      return { mode: { kind: 'blackhole' }, label: 'blackhole' };
    case 'one-way': {
      const direction = rng.chance(0.5) ? 'to-target' : 'to-client';
      return { mode: { kind: 'one-way', direction }, label: `one-way ${direction}` };
    }
    case 'reset':
      return { mode: { kind: 'reset' }, label: 'reset' };
    case 'latency': {
      const delayMs = rng.int(50, 400);
      const jitterMs = rng.int(0, 200);
      return { mode: { kind: 'latency', delayMs, jitterMs }, label: `latency ${delayMs}±${jitterMs} ms` };
    }
  }
}

function nftMode(rng: Prng, netem: boolean): { fault: NftFault; label: string } {
  const kind = rng.weighted<'drop' | 'one-way' | 'reject' | 'loss' | 'delay'>([
    ['drop', 4],
    ['one-way', 3],
    ['reject', 2],
    ['loss', 2],
    ['delay', netem ? 2 : 0],
  ]);
  switch (kind) {
    case 'drop':
      return { fault: { kind: 'drop' }, label: 'nft drop' };
    case 'one-way': {
      const direction = rng.chance(0.5) ? 'to-target' : 'to-client';
      return { fault: { kind: 'one-way', direction }, label: `nft one-way ${direction}` };
    }
    case 'reject':
      return { fault: { kind: 'reject' }, label: 'nft reject (RST)' };
    case 'loss': {
      const percent = rng.int(10, 61);
      return { fault: { kind: 'loss', percent }, label: `nft loss ${percent} %` };
    }
    case 'delay': {
      const delayMs = rng.int(50, 400);
      const jitterMs = rng.int(0, 200);
      return { fault: { kind: 'delay', delayMs, jitterMs }, label: `netem delay ${delayMs}±${jitterMs} ms` };
    }
  }
}

/** One random nemesis over the topology. With the default mix (proxies only) this is the historical draw. */
export function randomNemesis(rng: Prng, t: Topology, mix: FaultMix = {}): Nemesis {
  const p = processNames(t);
  const specs = linkSpecs(t);
  const proxied = specs.filter((l) => l.proxy).map((l) => l.name);
  const allowed = mix.nftLinks === undefined ? undefined : new Set(mix.nftLinks);
  const nftLinks = specs.filter((l) => l.nft && (allowed === undefined || allowed.has(l.name))).map((l) => l.name);
  const proxy = (mix.proxy ?? proxied.length > 0) && proxied.length > 0;
  const nft = mix.nft === true && nftLinks.length > 0;
  const etcdProxies = proxy && proxied.some((l) => l.startsWith('etcd-peer->'));
  const processes = mix.processes ?? true;
  const kind = rng.weighted<
    | 'pause'
    | 'kill'
    | 'net-link'
    | 'net-process'
    | 'etcd-leader'
    | 'etcd-partition'
    | 'nft-link'
    | 'nft-process'
    | 'nft-partition'
    | 'clock'
    | 'disk'
  >([
    ['pause', processes ? 3 : 0],
    ['kill', processes ? 2 : 0],
    ['net-link', proxy ? 3 : 0],
    ['net-process', proxy ? 2 : 0],
    ['etcd-leader', processes && t.etcdMembers > 1 ? 1 : 0],
    ['etcd-partition', t.etcdMembers > 1 && etcdProxies ? 1 : 0],
    ['nft-link', nft ? 3 : 0],
    ['nft-process', nft ? 2 : 0],
    ['nft-partition', nft && t.etcdMembers > 1 ? 2 : 0],
    ['clock', mix.clock === true && p.coordinators.length > 0 ? 2 : 0],
    ['disk', mix.disk === true ? 1 : 0],
  ]);
  const anyProcess = [...p.etcd, ...p.sinks, ...p.coordinators, ...p.workers];
  const protect = new Set(mix.protect ?? []);
  const killable = [...anyProcess, ...p.postgres].filter((n) => !protect.has(n));
  const around = (who: string, among: readonly string[]): string[] =>
    among.filter((l) => l.startsWith(`${who}->`) || l.endsWith(`->${who}`));
  switch (kind) {
    case 'pause':
      return { kind: 'pause', process: rng.pick(anyProcess) };
    case 'kill':
      return { kind: 'kill', process: rng.pick(killable) };
    case 'etcd-leader': {
      const pause = rng.chance(0.5);
      // With protected processes the leader (maybe one of them) is only paused.
      return { kind: pause || protect.size > 0 ? 'pause' : 'kill', process: 'etcd-leader' };
    }
    case 'etcd-partition': {
      // Cut every peer connection into one member: it can no longer send to its peers.
      const member = rng.pick(p.etcd);
      return { kind: 'net', links: [`etcd-peer->${member}`], mode: { kind: 'blackhole' }, label: `isolate ${member}` };
    }
    case 'net-link': {
      const { mode, label } = netMode(rng);
      return { kind: 'net', links: [rng.pick(proxied)], mode, label };
    }
    case 'net-process': {
      // Every proxied link into or out of one process.
      const candidates = [...p.sinks, ...p.coordinators, ...p.workers].filter((w) => around(w, proxied).length > 0);
      const who = rng.pick(candidates);
      const { mode, label } = netMode(rng);
      return { kind: 'net', links: around(who, proxied), mode, label: `${label} around ${who}` };
    }
    case 'nft-link': {
      const { fault, label } = nftMode(rng, mix.netem === true);
      return { kind: 'nft', links: [rng.pick(nftLinks)], fault, label };
    }
    case 'nft-process': {
      const candidates = [...p.etcd, ...p.sinks, ...p.coordinators, ...p.workers].filter(
        (w) => around(w, nftLinks).length > 0,
      );
      const who = rng.pick(candidates);
      const { fault, label } = nftMode(rng, mix.netem === true);
      return { kind: 'nft', links: around(who, nftLinks), fault, label: `${label} around ${who}` };
    }
    case 'nft-partition': {
      const member = rng.chance(0.3) ? 'etcd-leader' : rng.pick(p.etcd);
      const withCoordinator = rng.chance(0.6);
      const direction = rng.weighted<PartitionDirection>([
        ['both', 3],
        ['inbound', 1],
        ['outbound', 1],
      ]);
      return { kind: 'partition', member, withCoordinator, direction, via: 'nft' };
    }
    case 'clock': {
      const magnitude = rng.int(5, 301);
      return {
        kind: 'clock',
        process: rng.pick(p.coordinators),
        jumpSeconds: rng.chance(0.5) ? magnitude : -magnitude,
      };
    }
    case 'disk':
      return { kind: 'disk-full', process: p.sinks[0]! };
  }
}

/** The random mix: a fault every ~intervalMs (±25 %), each lasting minFaultMs–maxFaultMs, one at a time. */
export function buildSchedule(options: ScheduleOptions, topology: Topology, mix: FaultMix = {}): ScheduleStep[] {
  const rng = new Prng(options.seed);
  const interval = options.intervalMs ?? 5_000;
  const minFault = options.minFaultMs ?? 1_000;
  const maxFault = options.maxFaultMs ?? 5_000;
  const steps: ScheduleStep[] = [];
  let at = rng.int(200, 1_000);
  while (at < options.durationMs) {
    const cycle = Math.round(interval * (0.75 + rng.next() * 0.5));
    const durationMs = Math.min(rng.int(minFault, maxFault + 1), Math.max(minFault, cycle - 500));
    if (at + durationMs > options.durationMs) break;
    steps.push({ atMs: at, durationMs, nemesis: randomNemesis(rng, topology, mix) });
    at += Math.max(cycle, durationMs + 500);
  }
  return steps;
}

export function describeNemesis(n: Nemesis): string {
  switch (n.kind) {
    case 'pause':
      return `pause ${n.process}`;
    case 'kill':
      return `kill ${n.process} (restart after)`;
    case 'net':
    case 'nft':
      return `${n.label} on ${n.links.length === 1 ? n.links[0] : `${n.links.length} links`}`;
    case 'partition':
      return `partition ${n.direction === 'both' ? '' : `(${n.direction} dropped) `}${n.member}${n.withCoordinator ? ' + its coordinator' : ''} (${n.via})`;
    case 'clock':
      return `clock of ${n.process} ${n.jumpSeconds >= 0 ? '+' : ''}${n.jumpSeconds} s`;
    case 'disk-full':
      return `disk full under ${n.process}`;
  }
}
