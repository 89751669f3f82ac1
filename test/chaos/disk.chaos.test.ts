/**
 * The sink's disk full (root: a 32 MiB tmpfs under the SQLite sink, filled to the last byte under
 * load): refused with 503 UNAVAILABLE, no acknowledged write lost, no crash, writes accepted again
 * once the space is back, every task completed. Skipped without root.
 */
import { describe, expect, it } from 'vitest';
import { runChaos } from './runner.js';

const root = typeof process.getuid === 'function' && process.getuid() === 0;
if (!root) process.stderr.write('[chaos disk] skipped: mounting a tmpfs needs root\n');

describe.skipIf(!root)("chaos: the sink's disk full", () => {
  it('503 UNAVAILABLE while full, recovery once freed, nothing acknowledged lost', { timeout: 120_000 }, async () => {
    const summary = await runChaos({ seed: 1, scenario: 'sink-disk-full', completionBoundMs: 30_000 });
    process.stderr.write(`${summary.files.summary}\n`);
    expect(summary.error, summary.error).toBeUndefined();
    expect(summary.violations).toEqual([]);
    expect(summary.faults['disk-full']).toBe(1);
    expect(summary.scenarioNotes).toMatchObject({ refusedWith: 'UNAVAILABLE', recovered: true });
    expect(summary.tasks.completed).toBe(summary.tasks.submitted);
  });
});
