/**
 * The machine a run was measured on (nproc, CPU model, memory, node and etcd versions) and how busy
 * it was: the load average at start and every 5 s during the run, and the CPU that processes other
 * than the bench's own used ("foreign" CPU, /proc/stat busy time minus the bench's process tree).
 * A run is marked overloaded when the box was not quiet: foreign CPU above 0.25 cores averaged over
 * the run or above 0.5 cores in any 5 s sample, or a 1-minute load average of nproc or more at start.
 * Its figures are still printed, but no target counts as met.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { etcdVersion } from './infra/etcd.js';
import { foreignCpuWindow } from './infra/proc.js';

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly node: string;
  readonly etcd: string;
  readonly loadAverage: string;
}

export interface LoadRecord {
  /** 1, 5 and 15-minute load averages when the run started. */
  readonly loadAtStart: readonly number[];
  /** 1-minute load average every 5 s during the run. */
  readonly loadSamples: readonly number[];
  readonly loadMax: number;
  /** Cores used by processes outside the bench, mean over the run and the highest 5 s sample. */
  readonly foreignCoresMean: number;
  readonly foreignCoresMax: number;
  readonly overloaded: boolean;
  readonly overloadedBecause: string | null;
}

function loadAverages(): number[] {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).map(Number);
  } catch {
    return [];
  }
}

export function describeMachine(): Machine {
  let cpuModel = 'unknown';
  try {
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpuModel;
  } catch {
    // not Linux
  }
  return {
    nproc: availableParallelism(),
    cpuModel,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    etcd: etcdVersion(),
    loadAverage: loadAverages().join(' '),
  };
}

export function formatMachine(m: Machine): string {
  return `${m.nproc} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB RAM, Node ${m.node}, etcd ${m.etcd}`;
}

/** Samples the load every 5 s until `finish()`. */
export class LoadRecorder {
  readonly #atStart = loadAverages();
  readonly #loads: number[] = [];
  readonly #foreign: number[] = [];
  readonly #whole = foreignCpuWindow();
  #window = foreignCpuWindow();
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#timer = setInterval(() => {
      this.#loads.push(loadAverages()[0] ?? 0);
      this.#foreign.push(this.#window.end());
      this.#window = foreignCpuWindow();
    }, 5_000);
    this.#timer.unref();
  }

  /** Foreign cores in the latest 5 s sample (0 before the first). */
  latestForeign(): number {
    return this.#foreign.at(-1) ?? 0;
  }

  finish(nproc: number): LoadRecord {
    clearInterval(this.#timer);
    const foreignCoresMean = this.#whole.end();
    const foreignCoresMax = Math.max(0, ...this.#foreign);
    const reasons: string[] = [];
    if (foreignCoresMean > 0.25) reasons.push(`other processes used ${foreignCoresMean.toFixed(2)} cores on average`);
    if (foreignCoresMax > 0.5) reasons.push(`other processes used ${foreignCoresMax.toFixed(2)} cores in a 5 s sample`);
    if ((this.#atStart[0] ?? 0) >= nproc) reasons.push(`load average ${this.#atStart[0] ?? 0} at start`);
    const r2 = (x: number) => Math.round(x * 100) / 100;
    return {
      loadAtStart: this.#atStart,
      loadSamples: this.#loads.map(r2),
      loadMax: Math.max(0, ...this.#loads),
      foreignCoresMean: r2(foreignCoresMean),
      foreignCoresMax: r2(foreignCoresMax),
      overloaded: reasons.length > 0,
      overloadedBecause: reasons.length > 0 ? reasons.join('; ') : null,
    };
  }
}
