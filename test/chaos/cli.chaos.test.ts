/**
 * The `pnpm chaos` entry: options come from the environment (test/chaos/cli.sh turns flags into
 * these), the run's summary path is written to LEASEHOLD_CHAOS_SUMMARY_PATH_FILE, and the test
 * fails iff the checker found a violation (or the run broke). Skipped unless LEASEHOLD_CHAOS_CLI=1.
 *
 * | env                          | flag              | default     |
 * |------------------------------|-------------------|-------------|
 * | LEASEHOLD_CHAOS_SEED         | --seed N          | 1           |
 * | LEASEHOLD_CHAOS_DURATION     | --duration 10m    | 60s         |
 * | LEASEHOLD_CHAOS_SCENARIO     | --scenario NAME   | random-mix  |
 * | LEASEHOLD_CHAOS_ETCD_MEMBERS | --etcd-members 3  | 1           |
 * | LEASEHOLD_CHAOS_SABOTAGE     | --sabotage KIND   | none        |
 * | LEASEHOLD_CHAOS_TASKS        | --tasks N         | 60 (+1/s past 60 s) |
 * | LEASEHOLD_CHAOS_WORKERS      | --workers N       | 4           |
 * | LEASEHOLD_CHAOS_OUT          | --out DIR         | chaos-results/... |
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseDuration, runChaos } from './runner.js';

const env = process.env;
const enabled = env.LEASEHOLD_CHAOS_CLI === '1';

function int(name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return Number(v);
}

describe.skipIf(!enabled)('chaos CLI run', () => {
  it('finds no violation', { timeout: 24 * 3_600_000 }, async () => {
    const durationMs = parseDuration(env.LEASEHOLD_CHAOS_DURATION ?? '60s');
    const sabotage = env.LEASEHOLD_CHAOS_SABOTAGE;
    if (sabotage !== undefined && sabotage !== '' && sabotage !== 'skip-fence' && sabotage !== 'grant-before-advance')
      throw new Error(`LEASEHOLD_CHAOS_SABOTAGE must be skip-fence or grant-before-advance, got ${sabotage}`);
    const summary = await runChaos({
      seed: int('LEASEHOLD_CHAOS_SEED', 1),
      durationMs,
      scenario: env.LEASEHOLD_CHAOS_SCENARIO ?? 'random-mix',
      etcdMembers: int('LEASEHOLD_CHAOS_ETCD_MEMBERS', 1),
      sabotage: sabotage === '' ? undefined : sabotage,
      workers: int('LEASEHOLD_CHAOS_WORKERS', 4),
      tasks: int('LEASEHOLD_CHAOS_TASKS', 60 + Math.max(0, Math.round((durationMs - 60_000) / 1000))),
      ...(env.LEASEHOLD_CHAOS_OUT === undefined || env.LEASEHOLD_CHAOS_OUT === ''
        ? {}
        : { outDir: env.LEASEHOLD_CHAOS_OUT }),
    });
    if (env.LEASEHOLD_CHAOS_SUMMARY_PATH_FILE !== undefined)
      writeFileSync(env.LEASEHOLD_CHAOS_SUMMARY_PATH_FILE, `${summary.files.summary}\n`);
    expect(summary.error, summary.error).toBeUndefined();
    expect(summary.violationCounts).toEqual({});
  });
});
