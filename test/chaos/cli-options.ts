/**
 * The `pnpm chaos` options from the environment (test/chaos/cli.sh turns flags into these; the
 * table in cli.chaos.test.ts lists them). Pure, so a unit test covers every variable: only flags
 * given explicitly appear in the result, so a profile's defaults stand for the others.
 */
import { parseDuration, SABOTAGES, type ChaosOptions, type Sabotage } from './options.js';

type Env = Readonly<Record<string, string | undefined>>;

function given(env: Env, name: string): boolean {
  return env[name] !== undefined && env[name] !== '';
}

function int(env: Env, name: string): number | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if (!/^\d+$/.test(v)) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return Number(v);
}

function pick<T extends string>(env: Env, name: string, allowed: readonly T[]): T | undefined {
  const v = env[name];
  if (v === undefined || v === '') return undefined;
  if (!(allowed as readonly string[]).includes(v))
    throw new Error(`${name} must be one of ${allowed.join(', ')}, got ${v}`);
  return v as T;
}

/**
 * `NAME=VALUE` lines (cli.sh joins repeated `--coordinator-env` flags with newlines). Names are
 * environment variable names; the value may contain `=`.
 */
export function parseEnvAssignments(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const m = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m === null) throw new Error(`${what} wants NAME=VALUE, got ${line}`);
    out[m[1] ?? ''] = m[2] ?? '';
  }
  return out;
}

/** The seed (default 1). */
export function seedFromEnv(env: Env): number {
  return int(env, 'LEASEHOLD_CHAOS_SEED') ?? 1;
}

/** Flags given explicitly (undefined = not given, so the profile's default stands). */
export function optionsFromEnv(env: Env): Partial<ChaosOptions> {
  const opt = <K extends keyof ChaosOptions>(key: K, value: ChaosOptions[K] | undefined): Partial<ChaosOptions> =>
    value === undefined ? {} : { [key]: value };
  return {
    ...opt(
      'durationMs',
      given(env, 'LEASEHOLD_CHAOS_DURATION') ? parseDuration(env.LEASEHOLD_CHAOS_DURATION ?? '') : undefined,
    ),
    ...opt('scenario', given(env, 'LEASEHOLD_CHAOS_SCENARIO') ? env.LEASEHOLD_CHAOS_SCENARIO : undefined),
    ...opt('etcdMembers', int(env, 'LEASEHOLD_CHAOS_ETCD_MEMBERS')),
    ...opt('sabotage', pick<Sabotage>(env, 'LEASEHOLD_CHAOS_SABOTAGE', SABOTAGES)),
    ...opt('workers', int(env, 'LEASEHOLD_CHAOS_WORKERS')),
    ...opt('tasks', int(env, 'LEASEHOLD_CHAOS_TASKS')),
    ...opt('outDir', given(env, 'LEASEHOLD_CHAOS_OUT') ? env.LEASEHOLD_CHAOS_OUT : undefined),
    ...opt('network', pick(env, 'LEASEHOLD_CHAOS_NETWORK', ['proxy', 'netns', 'mixed'] as const)),
    ...opt('clock', env.LEASEHOLD_CHAOS_CLOCK === '1' ? true : undefined),
    ...opt('plaintext', env.LEASEHOLD_CHAOS_PLAINTEXT === '1' ? true : undefined),
    ...opt('sinkStore', pick(env, 'LEASEHOLD_CHAOS_SINK_STORE', ['sqlite', 'postgres'] as const)),
    ...opt('sinks', int(env, 'LEASEHOLD_CHAOS_SINKS')),
    ...opt(
      'resourceSampleMs',
      given(env, 'LEASEHOLD_CHAOS_SAMPLE') ? parseDuration(env.LEASEHOLD_CHAOS_SAMPLE ?? '') : undefined,
    ),
    ...opt('target', given(env, 'LEASEHOLD_CHAOS_TARGET') ? env.LEASEHOLD_CHAOS_TARGET : undefined),
    ...opt('backlog', int(env, 'LEASEHOLD_CHAOS_BACKLOG')),
    ...opt(
      'coordinatorEnv',
      given(env, 'LEASEHOLD_CHAOS_COORDINATOR_ENV')
        ? parseEnvAssignments(env.LEASEHOLD_CHAOS_COORDINATOR_ENV ?? '', '--coordinator-env')
        : undefined,
    ),
  };
}
