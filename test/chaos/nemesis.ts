/**
 * Applying schedule steps to a running {@link ChaosCluster} (processes, proxies, nftables, clocks,
 * the sink's disk), and recording each as a fault window
 * (start/end on a monotonic clock aligned to epoch ms, so it lines up with the processes' logs).
 */
import type { ChaosCluster, ChaosProcess } from '../harness/chaos-cluster.js';
import type { NftFault } from '../harness/chaos-network.js';
import type { FaultKind, FaultWindow } from './history.js';
import { describeNemesis, type Nemesis } from './schedule.js';

export const nowMs = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class FaultLog {
  readonly windows: FaultWindow[] = [];
  readonly active = new Map<number, { kind: FaultKind; targets: string[]; startMs: number; detail: string }>();
  #nextId = 1;

  open(kind: FaultKind, targets: string[], detail: string): number {
    const id = this.#nextId++;
    this.active.set(id, { kind, targets, startMs: nowMs(), detail });
    return id;
  }

  close(id: number): void {
    const a = this.active.get(id);
    if (a === undefined) return;
    this.active.delete(id);
    this.windows.push({ id, kind: a.kind, targets: a.targets, startMs: a.startMs, endMs: nowMs(), detail: a.detail });
  }

  /** Windows still open are closed as "never healed" (endMs undefined). */
  all(): FaultWindow[] {
    const open = [...this.active.entries()].map(([id, a]): FaultWindow => ({
      id,
      kind: a.kind,
      targets: a.targets,
      startMs: a.startMs,
      endMs: undefined,
    }));
    return [...this.windows, ...open].sort((a, b) => a.startMs - b.startMs);
  }

  describeActive(): string {
    return [...this.active.values()].map((a) => a.detail).join('; ');
  }
}

function processOf(cluster: ChaosCluster, name: string): ChaosProcess {
  const p = cluster.processes.get(name);
  if (p === undefined) throw new Error(`no process ${name}`);
  return p;
}

/** Resolve symbolic targets (`etcd-leader`) to a process name, at the moment the fault starts. */
async function resolveProcess(cluster: ChaosCluster, name: string): Promise<string> {
  if (name !== 'etcd-leader') return name;
  return (await cluster.etcdLeader()) ?? cluster.etcdNames[0] ?? 'etcd-m0';
}

const NFT_KINDS: Record<NftFault['kind'], FaultKind> = {
  drop: 'nft-drop',
  'one-way': 'nft-one-way',
  reject: 'nft-reject',
  loss: 'nft-loss',
  delay: 'netem-delay',
};

/**
 * Start a nemesis; returns the heal function (idempotent). A kill restarts on heal, a pause
 * continues, a network fault puts the links back, a clock goes back to its standing skew, a full
 * disk gets its space back.
 */
export async function startNemesis(
  cluster: ChaosCluster,
  faults: FaultLog,
  nemesis: Nemesis,
): Promise<() => Promise<void>> {
  switch (nemesis.kind) {
    case 'pause': {
      const name = await resolveProcess(cluster, nemesis.process);
      const p = processOf(cluster, name);
      if (!p.isRunning() || !p.canPause) return async () => undefined;
      const id = faults.open('pause', [name], `pause ${name}`);
      p.pause();
      return async () => {
        if (!faults.active.has(id)) return;
        p.resume();
        faults.close(id);
      };
    }
    case 'kill': {
      const name = await resolveProcess(cluster, nemesis.process);
      const p = processOf(cluster, name);
      if (!p.isRunning()) return async () => undefined;
      const id = faults.open('kill', [name], `kill ${name}`);
      await p.kill();
      return async () => {
        if (!faults.active.has(id)) return;
        try {
          await p.restart();
        } finally {
          faults.close(id);
        }
      };
    }
    case 'net': {
      const kind: FaultKind = nemesis.label.startsWith('isolate')
        ? 'partition-etcd-member'
        : (nemesis.mode.kind as FaultKind);
      const heal = cluster.network.setProxy(nemesis.links, nemesis.mode);
      const id = faults.open(kind, [...nemesis.links], describeNemesis(nemesis));
      return async () => {
        if (!faults.active.has(id)) return;
        await heal();
        faults.close(id);
      };
    }
    case 'nft': {
      const heal = await cluster.network.cutNft(nemesis.links, nemesis.fault);
      const id = faults.open(NFT_KINDS[nemesis.fault.kind], [...nemesis.links], describeNemesis(nemesis));
      return async () => {
        if (!faults.active.has(id)) return;
        await heal();
        faults.close(id);
      };
    }
    case 'partition': {
      const member = await resolveProcess(cluster, nemesis.member);
      const index = Number(/(\d+)$/.exec(member)?.[1] ?? '0');
      const near = `coordinator-${index}`;
      const group = nemesis.withCoordinator && cluster.processes.has(near) ? [member, near] : [member];
      const { heal, links } = await cluster.network.partition(group, nemesis.direction, nemesis.via);
      const id = faults.open(
        nemesis.via === 'nft' ? 'partition' : 'partition-etcd-member',
        links,
        `partition ${nemesis.direction === 'both' ? '' : `(${nemesis.direction} dropped) `}${group.join(' + ')} (${links.length} links, ${nemesis.via})`,
      );
      return async () => {
        if (!faults.active.has(id)) return;
        await heal();
        faults.close(id);
      };
    }
    case 'clock': {
      const clock = cluster.clocks.get(nemesis.process);
      if (clock === undefined) return async () => undefined;
      const standing = clock.offsetSeconds;
      const seen = await cluster.setClock(nemesis.process, standing + nemesis.jumpSeconds);
      const id = faults.open(
        'clock-jump',
        [nemesis.process],
        `${describeNemesis(nemesis)}${seen ? '' : ' (not yet seen in its Date header)'}`,
      );
      return async () => {
        if (!faults.active.has(id)) return;
        await cluster.setClock(nemesis.process, standing);
        faults.close(id);
      };
    }
    case 'disk-full': {
      const disk = cluster.disk;
      if (disk === undefined) return async () => undefined;
      const bytes = disk.fill();
      const id = faults.open(
        'disk-full',
        [nemesis.process],
        `disk full under ${nemesis.process} (${bytes} bytes filled)`,
      );
      return async () => {
        if (!faults.active.has(id)) return;
        disk.free();
        faults.close(id);
      };
    }
  }
}

/** Run one nemesis for `durationMs`, then heal it. */
export async function runNemesis(
  cluster: ChaosCluster,
  faults: FaultLog,
  nemesis: Nemesis,
  durationMs: number,
  signal?: AbortSignal,
): Promise<void> {
  const heal = await startNemesis(cluster, faults, nemesis);
  try {
    const until = nowMs() + durationMs;
    while (nowMs() < until && signal?.aborted !== true) await sleep(Math.min(100, until - nowMs()));
  } finally {
    await heal();
  }
}
