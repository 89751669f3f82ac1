/**
 * What a benchmarked process costs, read from /proc (Linux only): CPU time (utime + stime, in
 * milliseconds) and resident memory (VmRSS, in bytes). A process that is gone reads as undefined.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

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

/** A field of a schedstat file (ns): 0 time on a CPU, 1 time runnable waiting for one. Throws if unreadable. */
function schedstat(path: string, field: 0 | 1): number {
  return Number(readFileSync(path, 'utf8').split(' ')[field]);
}

/**
 * CPU time of a process's live threads (ms), summed from each thread's
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds) — for small figures over short windows, such as an
 * idle process, where `cpuMs`'s 10 ms clock ticks would round a window to 0 or one tick per process
 * (the idle row's BullMQ side read 0 ms/s over 4 s in the run of 2026-12-07 08:35). A thread that
 * exits inside a window takes its time with it: for load, `cpuMs`. Falls back to `cpuMs` where
 * schedstat cannot be read.
 */
export function threadCpuMs(pid: number): number | undefined {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return undefined;
  }
  let ns = 0;
  let read = 0;
  for (const tid of tids) {
    try {
      const runNs = schedstat(`/proc/${pid}/task/${tid}/schedstat`, 0);
      if (!Number.isFinite(runNs)) return cpuMs(pid);
      ns += runNs;
      read += 1;
    } catch {
      // A thread that exited between the listing and the read: its time is gone with it.
    }
  }
  // No thread readable: a kernel without schedstat (or the process just ended).
  return read === 0 ? cpuMs(pid) : ns / 1e6;
}

/**
 * Time a process's main thread has spent runnable but waiting for a CPU (ms; the second field of
 * /proc/<pid>/schedstat, needs schedstats in the kernel). For a Node daemon that is the event loop
 * waiting for a core: latency that no profile of the process shows.
 */
export function runQueueWaitMs(pid: number): number | undefined {
  try {
    const waitNs = schedstat(`/proc/${pid}/schedstat`, 1);
    return Number.isFinite(waitNs) ? waitNs / 1e6 : undefined;
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

/** utime + stime + cutime + cstime (ms): the process and the children it has reaped. */
function cpuWithReapedMs(pid: number): { cpu: number; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    return { cpu: (ticks * 1000) / TICKS_PER_SECOND, ppid: Number(fields[1]) };
  } catch {
    return undefined;
  }
}

/**
 * CPU ms used so far by this process and every live descendant (each with its reaped children), so
 * a child that exits inside a window still counts (its parent reaps it into cutime/cstime).
 */
export function treeCpuMs(root = process.pid): number {
  const byParent = new Map<number, { pid: number; cpu: number }[]>();
  let rootCpu = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const s = cpuWithReapedMs(pid);
    if (s === undefined) continue;
    if (pid === root) rootCpu = s.cpu;
    const list = byParent.get(s.ppid) ?? [];
    list.push({ pid, cpu: s.cpu });
    byParent.set(s.ppid, list);
  }
  let total = rootCpu;
  const stack = [root];
  while (stack.length > 0) {
    const parent = stack.pop() ?? 0;
    for (const child of byParent.get(parent) ?? []) {
      total += child.cpu;
      stack.push(child.pid);
    }
  }
  return total;
}

/** Busy CPU ms of the whole machine (all cores) from /proc/stat: everything but idle and iowait. */
export function systemBusyMs(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const v = line.trim().split(/\s+/).slice(1).map(Number);
    const total = v.slice(0, 8).reduce((a, b) => a + b, 0);
    const idle = (v[3] ?? 0) + (v[4] ?? 0);
    return ((total - idle) * 1000) / TICKS_PER_SECOND;
  } catch {
    return 0;
  }
}

/**
 * CPU (in cores) used by processes that are not this bench's own while a window runs: the figure
 * that says whether another job shared the machine. `end()` returns the mean cores over the window.
 */
export function foreignCpuWindow(): { end(): number } {
  const busy0 = systemBusyMs();
  const tree0 = treeCpuMs();
  const t0 = performance.now();
  return {
    end: () => {
      const elapsed = performance.now() - t0;
      if (elapsed <= 0) return 0;
      return Math.max(0, systemBusyMs() - busy0 - (treeCpuMs() - tree0)) / elapsed;
    },
  };
}

/**
 * Pin every thread of `pid` to `cpus` (e.g. '0' or '1') with util-linux `taskset -a -p`. Returns
 * false when taskset is missing or refused (the run goes on unpinned and says so).
 */
export function pinToCpus(pid: number, cpus: string): boolean {
  const r = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
  return r.status === 0;
}
