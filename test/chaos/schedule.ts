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

export interface Topology {
  readonly etcdMembers: number;
  readonly coordinators: number;
  readonly workers: number;
}

export type Nemesis =
  | { readonly kind: 'pause'; readonly process: string }
  | { readonly kind: 'kill'; readonly process: string }
  | { readonly kind: 'net'; readonly links: readonly string[]; readonly mode: ProxyMode; readonly label: string };

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

export function processNames(t: Topology): { etcd: string[]; coordinators: string[]; workers: string[] } {
  return {
    etcd: Array.from({ length: t.etcdMembers }, (_, i) => `etcd-m${i}`),
    coordinators: Array.from({ length: t.coordinators }, (_, i) => `coordinator-${i}`),
    workers: Array.from({ length: t.workers }, (_, i) => `worker-${i}`),
  };
}

/** Every proxied link of the topology, by name. */
export function linkNames(t: Topology): string[] {
  const p = processNames(t);
  const links: string[] = [];
  for (const w of p.workers) {
    for (const c of p.coordinators) links.push(`${w}->${c}`);
    links.push(`${w}->sink`);
  }
  for (const c of p.coordinators) {
    links.push(`${c}->sink`);
    for (const e of p.etcd) links.push(`${c}->${e}`);
  }
  if (t.etcdMembers > 1) for (const e of p.etcd) links.push(`etcd-peer->${e}`);
  return links;
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

/** One random nemesis over the topology. */
export function randomNemesis(rng: Prng, t: Topology): Nemesis {
  const p = processNames(t);
  const links = linkNames(t);
  const kind = rng.weighted<'pause' | 'kill' | 'net-link' | 'net-process' | 'etcd-leader' | 'etcd-partition'>([
    ['pause', 3],
    ['kill', 2],
    ['net-link', 3],
    ['net-process', 2],
    ['etcd-leader', t.etcdMembers > 1 ? 1 : 0],
    ['etcd-partition', t.etcdMembers > 1 ? 1 : 0],
  ]);
  const anyProcess = [...p.etcd, 'sink', ...p.coordinators, ...p.workers];
  switch (kind) {
    case 'pause':
      return { kind: 'pause', process: rng.pick(anyProcess) };
    case 'kill':
      return { kind: 'kill', process: rng.pick(anyProcess) };
    case 'etcd-leader':
      return { kind: rng.chance(0.5) ? 'pause' : 'kill', process: 'etcd-leader' };
    case 'etcd-partition': {
      // Cut every peer connection into one member: it can no longer send to its peers.
      const member = rng.pick(p.etcd);
      return { kind: 'net', links: [`etcd-peer->${member}`], mode: { kind: 'blackhole' }, label: `isolate ${member}` };
    }
    case 'net-link': {
      const { mode, label } = netMode(rng);
      return { kind: 'net', links: [rng.pick(links)], mode, label };
    }
    case 'net-process': {
      // Every link into or out of one process.
      const who = rng.pick(['sink', ...p.coordinators, ...p.workers]);
      const { mode, label } = netMode(rng);
      const mine = links.filter((l) => l.startsWith(`${who}->`) || l.endsWith(`->${who}`));
      return { kind: 'net', links: mine, mode, label: `${label} around ${who}` };
    }
  }
}

/** The random mix: a fault every ~intervalMs (±25 %), each lasting minFaultMs–maxFaultMs, one at a time. */
export function buildSchedule(options: ScheduleOptions, topology: Topology): ScheduleStep[] {
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
    steps.push({ atMs: at, durationMs, nemesis: randomNemesis(rng, topology) });
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
      return `${n.label} on ${n.links.length === 1 ? n.links[0] : `${n.links.length} links`}`;
  }
}
