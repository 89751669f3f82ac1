/** The machine a run was measured on: nproc, CPU model, memory, node and etcd versions. */
import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { etcdVersion } from './infra/etcd.js';

export interface Machine {
  readonly nproc: number;
  readonly cpuModel: string;
  readonly memoryGiB: number;
  readonly node: string;
  readonly etcd: string;
  readonly loadAverage: string;
}

export function describeMachine(): Machine {
  let cpuModel = 'unknown';
  try {
    cpuModel = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpuModel;
  } catch {
    // not Linux
  }
  let loadAverage = '';
  try {
    loadAverage = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    // not Linux
  }
  return {
    nproc: availableParallelism(),
    cpuModel,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    etcd: etcdVersion(),
    loadAverage,
  };
}

export function formatMachine(m: Machine): string {
  return `${m.nproc} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB RAM, Node ${m.node}, etcd ${m.etcd}, load average at start ${m.loadAverage}`;
}
