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
 * | LEASEHOLD_CHAOS_SINK_STORE   | --sink-store S    | sqlite      |
 * | LEASEHOLD_CHAOS_SINKS        | --sinks N         | 1           |
 * | LEASEHOLD_CHAOS_SAMPLE       | --sample-resources 5s | off     |
 * | LEASEHOLD_CHAOS_TARGET       | --target FILE     | none (local cluster) |
 *
 * A profile supplies defaults; flags given explicitly override them. A run that cannot happen here
 * (e.g. `--network netns` without root) is skipped: the test passes and says SKIPPED.
 */
import { writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { findProfile } from './profiles.js';
import { parseDuration, runChaos, SABOTAGES, type ChaosOptions, type Sabotage } from './runner.js';

const env = process.env;
const enabled = env.LEASEHOLD_CHAOS_CLI === '1';

function int(name: string, fallback: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallback;
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return Number(v);
}

function pick<T extends string>(name: string, allowed: readonly T[]): T | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if (!(allowed as readonly string[]).includes(v))
    throw new Error(`${name} must be one of ${allowed.join(', ')}, got ${v}`);
  return v as T;
}

/** Flags given explicitly (undefined = not given, so the profile's default stands). */
function fromEnv(): Partial<ChaosOptions> {
  const opt = <K extends keyof ChaosOptions>(key: K, value: ChaosOptions[K] | undefined): Partial<ChaosOptions> =>
    value === undefined ? {} : { [key]: value };
  const given = (name: string): boolean => env[name] !== undefined && env[name] !== '';
  return {
    ...opt('durationMs', given('LEASEHOLD_CHAOS_DURATION') ? parseDuration(env.LEASEHOLD_CHAOS_DURATION!) : undefined),
    ...opt('scenario', given('LEASEHOLD_CHAOS_SCENARIO') ? env.LEASEHOLD_CHAOS_SCENARIO : undefined),
    ...opt('etcdMembers', given('LEASEHOLD_CHAOS_ETCD_MEMBERS') ? int('LEASEHOLD_CHAOS_ETCD_MEMBERS', 1) : undefined),
    ...opt('sabotage', pick<Sabotage>('LEASEHOLD_CHAOS_SABOTAGE', SABOTAGES)),
    ...opt('workers', given('LEASEHOLD_CHAOS_WORKERS') ? int('LEASEHOLD_CHAOS_WORKERS', 4) : undefined),
    ...opt('tasks', given('LEASEHOLD_CHAOS_TASKS') ? int('LEASEHOLD_CHAOS_TASKS', 60) : undefined),
    ...opt('outDir', given('LEASEHOLD_CHAOS_OUT') ? env.LEASEHOLD_CHAOS_OUT : undefined),
    ...opt('network', pick('LEASEHOLD_CHAOS_NETWORK', ['proxy', 'netns', 'mixed'] as const)),
    ...opt('clock', env.LEASEHOLD_CHAOS_CLOCK === '1' ? true : undefined),
    ...opt('sinkStore', pick('LEASEHOLD_CHAOS_SINK_STORE', ['sqlite', 'postgres'] as const)),
    ...opt('sinks', given('LEASEHOLD_CHAOS_SINKS') ? int('LEASEHOLD_CHAOS_SINKS', 1) : undefined),
    ...opt(
      'resourceSampleMs',
      given('LEASEHOLD_CHAOS_SAMPLE') ? parseDuration(env.LEASEHOLD_CHAOS_SAMPLE!) : undefined,
    ),
    ...opt('target', given('LEASEHOLD_CHAOS_TARGET') ? env.LEASEHOLD_CHAOS_TARGET : undefined),
  };
}

describe.skipIf(!enabled)('chaos CLI run', () => {
  it('finds no violation', { timeout: 24 * 3_600_000 }, async () => {
    const profileName = env.LEASEHOLD_CHAOS_PROFILE;
    const profile = profileName === undefined || profileName === '' ? undefined : findProfile(profileName);
    const given = fromEnv();
    const merged: Partial<ChaosOptions> = { ...profile?.options, ...given };
    const durationMs = merged.durationMs ?? 60_000;
    const summary = await runChaos({
      ...merged,
      seed: int('LEASEHOLD_CHAOS_SEED', 1),
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
