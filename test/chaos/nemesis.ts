/**
 * Applying schedule steps to a running {@link ChaosCluster}, and recording each as a fault window
 * (start/end on a monotonic clock aligned to epoch ms, so it lines up with the processes' logs).
 */
import type { ChaosCluster, ChaosProcess } from '../harness/chaos-cluster.js';
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

/**
 * Start a nemesis; returns the heal function (idempotent). A kill restarts on heal, a pause
 * continues, a network fault puts the links back to `pass`.
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
      if (!p.isRunning()) return async () => undefined;
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
      const proxies = nemesis.links.map((l) => {
        const proxy = cluster.proxies.get(l);
        if (proxy === undefined) throw new Error(`no proxy for link ${l}`);
        return proxy;
      });
      const kind: FaultKind = nemesis.label.startsWith('isolate')
        ? 'partition-etcd-member'
        : (nemesis.mode.kind as FaultKind);
      const id = faults.open(kind, [...nemesis.links], describeNemesis(nemesis));
      for (const proxy of proxies) proxy.setMode(nemesis.mode);
      return async () => {
        if (!faults.active.has(id)) return;
        for (const proxy of proxies) proxy.heal();
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
