/**
 * What a benchmarked process costs, read from /proc (Linux only): CPU time (utime + stime, in
 * milliseconds) and resident memory (VmRSS, in bytes). A process that is gone reads as undefined.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on every Linux this runs on). */
const TICKS_PER_SECOND = 100;

export function cpuMs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces) start at field 3 (state).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return ((utime + stime) * 1000) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

export function rssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    return kb === undefined ? undefined : Number(kb) * 1024;
  } catch {
    return undefined;
  }
}

/** CPU milliseconds per wall second of each pid over `run`. */
export async function cpuDuring<T>(
  pids: readonly number[],
  run: () => Promise<T>,
): Promise<{ result: T; cpuMsPerSecond: number[] }> {
  const before = pids.map((p) => cpuMs(p) ?? 0);
  const started = performance.now();
  const result = await run();
  const seconds = (performance.now() - started) / 1000;
  const after = pids.map((p) => cpuMs(p) ?? 0);
  return { result, cpuMsPerSecond: after.map((a, i) => (a - (before[i] ?? 0)) / seconds) };
}

/**
 * CPU microseconds per operation of named processes (and of this bench process, as `clients`),
 * accumulated over every measured round of one side.
 */
export class CpuPerOp {
  readonly #us = new Map<string, number>();
  #ops = 0;

  /** `run` reports its measured rate; CPU is read over all of it (warm-up included), so the
   * operations it stands for are rate × its whole wall time. */
  async measure<T extends { readonly perSecond: number }>(
    pids: Readonly<Record<string, number>>,
    run: () => Promise<T>,
  ): Promise<T> {
    const names = Object.keys(pids);
    const before = names.map((n) => cpuMs(pids[n] ?? 0) ?? 0);
    const self0 = process.cpuUsage();
    const t0 = performance.now();
    const result = await run();
    const wallSeconds = (performance.now() - t0) / 1000;
    const self = process.cpuUsage(self0);
    names.forEach((n, i) => {
      const used = ((cpuMs(pids[n] ?? 0) ?? 0) - (before[i] ?? 0)) * 1000;
      this.#us.set(n, (this.#us.get(n) ?? 0) + used);
    });
    this.#us.set('clients', (this.#us.get('clients') ?? 0) + self.user + self.system);
    this.#ops += result.perSecond * wallSeconds;
    return result;
  }

  /** `etcd 120, coordinator 90, …, total 400` (µs per operation). */
  describe(): string {
    if (this.#ops === 0) return 'n/a';
    let total = 0;
    const parts: string[] = [];
    for (const [name, us] of this.#us) {
      const per = us / this.#ops;
      total += per;
      parts.push(`${name} ${Math.round(per)}`);
    }
    return `${parts.join(', ')}, total ${Math.round(total)}`;
  }
}

/** Wait (up to `maxMs`) until `pid` uses under 10 % of a core over a 200 ms window. */
export async function waitIdle(pid: number, maxMs = 10_000): Promise<void> {
  const until = performance.now() + maxMs;
  while (performance.now() < until) {
    const before = cpuMs(pid) ?? 0;
    await new Promise((resolve) => setTimeout(resolve, 200));
    if ((cpuMs(pid) ?? 0) - before < 20) return;
  }
}
