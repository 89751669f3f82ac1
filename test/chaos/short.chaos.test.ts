/**
 * The short seeded profile, part of the main test command: the random mix (a fault every ~5 s for
 * 50 s: pauses and kills of any process, blackhole / one-way / reset / latency on any link) over a
 * workload in which some workers stop themselves between computing and writing and a quarter of the
 * tasks have a small retry policy and a handler that fails some attempts, against etcd, the
 * sink, two coordinators and four workers as real processes. Must find 0 violations.
 * Seed: LEASEHOLD_CHAOS_SHORT_SEED (default 1); the summary path is printed.
 */
import { describe, expect, it } from 'vitest';
import { runChaos } from './runner.js';

describe('chaos: short seeded profile', () => {
  it('random mix, 50 s of faults, 0 violations', { timeout: 300_000 }, async () => {
    const seed = Number(process.env.LEASEHOLD_CHAOS_SHORT_SEED ?? '1');
    const summary = await runChaos({ seed, durationMs: 50_000, tasks: 40, resources: 10, pauseRate: 0.2 });
    process.stderr.write(`${summary.files.summary}\n`);
    expect(summary.error, summary.error).toBeUndefined();
    expect(summary.violations).toEqual([]);
    // Tasks whose handler fails on purpose may end failed with their budget used (the checker judges it).
    expect(summary.tasks.completed + summary.tasks.failed).toBe(summary.tasks.submitted);
    expect(summary.retries?.failedAttempts).toBeGreaterThan(0);
    expect(summary.retries?.backoffsJudged).toBeGreaterThan(0);
    expect(summary.schedule.length).toBeGreaterThanOrEqual(8);
  });
});
