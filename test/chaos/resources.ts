/**
 * Samples every running process' resident memory and open file descriptors from /proc (VmRSS in
 * /proc/<pid>/status, entries of /proc/<pid>/fd) every `intervalMs`. A paused process is sampled
 * too (its numbers just do not move); a dead one is skipped. Linux only: elsewhere it records nothing.
 */
import { readdirSync, readFileSync } from 'node:fs';
import type { ChaosProcess } from '../harness/chaos-cluster.js';
import type { ResourceSample } from './history.js';
import { nowMs } from './nemesis.js';

/** One reading of a pid, or undefined when it is gone. */
export function readProc(pid: number): { rssKb: number; fds: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /^VmRSS:\s+(\d+) kB/m.exec(status);
    const fds = readdirSync(`/proc/${pid}/fd`).length;
    return { rssKb: rss === null ? 0 : Number(rss[1]), fds };
  } catch {
    return undefined;
  }
}

export class ResourceSampler {
  readonly samples: ResourceSample[] = [];
  readonly #processes: () => Iterable<Pick<ChaosProcess, 'name' | 'pid' | 'isRunning'>>;
  readonly #timer: NodeJS.Timeout;
  #stopped = false;

  constructor(processes: () => Iterable<Pick<ChaosProcess, 'name' | 'pid' | 'isRunning'>>, intervalMs: number) {
    this.#processes = processes;
    this.sample();
    this.#timer = setInterval(() => {
      this.sample();
    }, intervalMs);
    this.#timer.unref();
  }

  sample(): void {
    const at = nowMs();
    for (const p of this.#processes()) {
      const pid = p.pid();
      if (pid === undefined || !p.isRunning()) continue;
      const r = readProc(pid);
      if (r !== undefined) this.samples.push({ process: p.name, pid, atMs: at, ...r });
    }
  }

  /** Stop (one last sample the first time); returns every sample. */
  stop(): ResourceSample[] {
    if (this.#stopped) return this.samples;
    this.#stopped = true;
    clearInterval(this.#timer);
    this.sample();
    return this.samples;
  }
}
