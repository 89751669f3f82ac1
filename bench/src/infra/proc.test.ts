import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { cpuMs, threadCpuMs } from './proc.js';

/** Burn at least `ms` of this thread's CPU (by process.cpuUsage, which counts every thread). */
function burn(ms: number): void {
  const start = process.cpuUsage();
  let x = 0;
  while ((process.cpuUsage(start).user + process.cpuUsage(start).system) / 1000 < ms) x += Math.sqrt(x + 1);
  if (x < 0) throw new Error('unreachable');
}

describe('threadCpuMs', () => {
  it('reads below a clock tick, and counts the other threads of the process', async () => {
    // Below 10 ms: cpuMs (clock ticks) moves by 0 or 10; the per-thread sum moves by about what was used.
    const before = threadCpuMs(process.pid);
    burn(4);
    const after = threadCpuMs(process.pid);
    expect(before).toBeDefined();
    const used = (after ?? 0) - (before ?? 0);
    expect(used).toBeGreaterThanOrEqual(3);
    expect(Number.isInteger(used)).toBe(false); // nanoseconds, not 10 ms ticks

    // A worker thread's CPU is in the sum while it lives: it spins until its own thread (read from
    // /proc/thread-self, so a busy machine only makes it take longer) has used 40 ms.
    const atStart = threadCpuMs(process.pid) ?? 0;
    const worker = new Worker(
      `const { parentPort } = require('node:worker_threads');
       const { readFileSync } = require('node:fs');
       const ownNs = () => Number(readFileSync('/proc/thread-self/schedstat', 'utf8').split(' ')[0]);
       const end = ownNs() + 40e6; let x = 0;
       while (ownNs() < end) for (let i = 0; i < 10000; i++) x += Math.sqrt(x + 1);
       parentPort.postMessage(x);
       setInterval(() => {}, 1000);`,
      { eval: true },
    );
    await new Promise((resolve) => worker.once('message', resolve));
    const withWorker = (threadCpuMs(process.pid) ?? 0) - atStart;
    await worker.terminate();
    expect(withWorker).toBeGreaterThanOrEqual(40);
    expect(cpuMs(process.pid)).toBeDefined();
  });

  it('is undefined for a process that does not exist', () => {
    expect(threadCpuMs(2 ** 22 + 7)).toBeUndefined();
  });
});
