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
 * | LEASEHOLD_CHAOS_PROFILE      | --profile NAME    | none (profiles.ts) |
 * | LEASEHOLD_CHAOS_NETWORK      | --network MODE    | proxy       |
 * | LEASEHOLD_CHAOS_CLOCK        | --clock           | off         |
 * | LEASEHOLD_CHAOS_PLAINTEXT    | --plaintext       | off (TLS)   |
 * | LEASEHOLD_CHAOS_SINK_STORE   | --sink-store S    | sqlite      |
 * | LEASEHOLD_CHAOS_SINKS        | --sinks N         | 1           |
 * | LEASEHOLD_CHAOS_SAMPLE       | --sample-resources 5s | off     |
 * | LEASEHOLD_CHAOS_TARGET       | --target FILE     | none (local cluster) |
 * | LEASEHOLD_CHAOS_BACKLOG      | --backlog N       | 0           |
 * | LEASEHOLD_CHAOS_COORDINATOR_ENV | --coordinator-env NAME=VALUE (repeatable; lines) | none |
 *
 * Parsed by cli-options.ts (unit-tested in backlog.chaos.test.ts). A profile supplies defaults; flags given explicitly override them. A run that cannot happen here
 * (e.g. `--network netns` without root) is skipped: the test passes and says SKIPPED.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { optionsFromEnv, seedFromEnv } from './cli-options.js';
import { findProfile } from './profiles.js';
import { runChaos, type ChaosOptions } from './runner.js';

const env = process.env;
const enabled = env.LEASEHOLD_CHAOS_CLI === '1';

describe.skipIf(!enabled)('chaos CLI run', () => {
  it('finds no violation', { timeout: 24 * 3_600_000 }, async () => {
    const profileName = env.LEASEHOLD_CHAOS_PROFILE;
    const profile = profileName === undefined || profileName === '' ? undefined : findProfile(profileName);
    const given = optionsFromEnv(env);
    const merged: Partial<ChaosOptions> = { ...profile?.options, ...given };
    const durationMs = merged.durationMs ?? 60_000;
    const summary = await runChaos({
      ...merged,
      seed: seedFromEnv(env),
      durationMs,
      // One task per second past the first minute, unless given.
      tasks: given.tasks ?? profile?.options.tasks ?? 60 + Math.max(0, Math.round((durationMs - 60_000) / 1000)),
      ...(profile === undefined ? {} : { profile: profile.name }),
    });
    if (env.LEASEHOLD_CHAOS_SUMMARY_PATH_FILE !== undefined)
      writeFileSync(env.LEASEHOLD_CHAOS_SUMMARY_PATH_FILE, `${summary.files.summary}\n`);
    if (summary.skipped !== undefined) process.stderr.write(`SKIPPED: ${summary.skipped}\n`);
    expect(summary.error, summary.error).toBeUndefined();
    expect(summary.violationCounts).toEqual({});
  });
});
