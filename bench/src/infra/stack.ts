/**
 * A leasehold stack of real processes for one suite: the built sink (`synchronous=FULL`) and the
 * built coordinator, each its own process (so /proc gives each one's CPU and memory), on a shared
 * etcd under a fresh key prefix, with fresh keys. `LEASEHOLD_BENCH_PROFILE=coordinator,sink`
 * starts them with `node --cpu-prof` (profiles land in `.leasehold/bench-profiles/`), and
 * `LEASEHOLD_BENCH_NODE_ARGS_<WHAT>` with more node options (see {@link profileArgs}), and
 * `LEASEHOLD_BENCH_COORDINATOR_ENV` sets coordinator options (see {@link benchCoordinatorEnv}).
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCapabilitySeed, parseCapabilitySigningKey, publicKeyEntryOf } from '@leasehold/protocol';
import { killGroup, startNodeDaemon, type NodeDaemon } from './daemon.js';
import type { Etcd } from './etcd.js';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const SINK_MAIN = join(REPO_ROOT, 'packages/sink/dist/main.js');
export const COORDINATOR_MAIN = join(REPO_ROOT, 'packages/coordinator/dist/main.js');

const secret = (): string => randomBytes(18).toString('base64url');

export interface StackKeys {
  readonly sinkKey: string;
  /** The coordinator's capability signing key, `id:<seed>` (the sink gets its public key). */
  readonly capability: string;
  readonly workerKey: string;
  readonly adminKey: string;
}

export interface StackOptions {
  readonly name: string;
  readonly etcd: Etcd;
  readonly sessionTtlMs: number;
  readonly heartbeatIntervalMs: number;
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  /** How long the first start may take (default 20 s). */
  readonly startTimeoutMs?: number;
  /** Coordinator processes on the same etcd prefix and sink (default 1); the others are `peers`. */
  readonly coordinators?: number;
}

export interface Stack {
  readonly keys: StackKeys;
  readonly sink: NodeDaemon;
  /** The current coordinator process (throws while none runs: a restart that failed). */
  readonly coordinator: NodeDaemon;
  /** The other coordinators of `coordinators` (each its own id and process; never restarted). */
  readonly peers: readonly NodeDaemon[];
  readonly prefix: string;
  /**
   * SIGKILL the coordinator and start it again with the same configuration; resolves once the new
   * one answers `/readyz` 200 (its `readyAfterMs` is the restart-to-ready time), rejects with a
   * DaemonStartError when it exits or is not ready within `timeoutMs`.
   */
  restartCoordinator(timeoutMs: number): Promise<NodeDaemon>;
  stop(): Promise<void>;
}

/**
 * Node options for the `what` processes (`coordinator`, `sink`, `worker`): `--cpu-prof` when
 * LEASEHOLD_BENCH_PROFILE names it, plus the space-separated options of
 * LEASEHOLD_BENCH_NODE_ARGS_<WHAT> (e.g. `LEASEHOLD_BENCH_NODE_ARGS_COORDINATOR='--log-deopt
 * --logfile=/tmp/c.log'`, or `--perf-basic-prof` for `perf`), where `{name}` is the process's name.
 */
export function profileArgs(what: string, name: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const extra = (env[`LEASEHOLD_BENCH_NODE_ARGS_${what.toUpperCase()}`] ?? '')
    .split(' ')
    .filter((a) => a !== '')
    .map((a) => a.replaceAll('{name}', name));
  const wanted = (env.LEASEHOLD_BENCH_PROFILE ?? '').split(',');
  if (!wanted.includes(what)) return extra;
  const dir = join(REPO_ROOT, '.leasehold', 'bench-profiles');
  mkdirSync(dir, { recursive: true });
  return [...extra, '--cpu-prof', '--cpu-prof-dir', dir, '--cpu-prof-name', `${name}-${what}-${Date.now()}.cpuprofile`];
}

/**
 * Coordinator settings for every stack of the run, from LEASEHOLD_BENCH_COORDINATOR_ENV:
 * space-separated `NAME=VALUE` (e.g. `LEASEHOLD_COORDINATOR_ETCD_COMBINED_REQUESTS=0`), for A-B
 * runs of a setting. A suite's own settings win over them.
 */
export function benchCoordinatorEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const pair of (env.LEASEHOLD_BENCH_COORDINATOR_ENV ?? '').split(' ')) {
    if (pair === '') continue;
    const at = pair.indexOf('=');
    if (at <= 0) throw new Error(`LEASEHOLD_BENCH_COORDINATOR_ENV: "${pair}" is not NAME=VALUE`);
    out[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return out;
}

export async function startSinkProcess(
  dir: string,
  keys: Pick<StackKeys, 'sinkKey' | 'capability'>,
  name = 'sink',
  env: Readonly<Record<string, string>> = {},
): Promise<NodeDaemon> {
  return startNodeDaemon({
    name: 'sink',
    script: SINK_MAIN,
    dir,
    nodeArgs: profileArgs('sink', name),
    env: {
      LEASEHOLD_SINK_DB_PATH: join(dir, 'sink.db'),
      LEASEHOLD_SINK_SYNCHRONOUS: 'FULL',
      LEASEHOLD_SINK_LOG_LEVEL: 'error',
      LEASEHOLD_SINK_COORDINATOR_KEYS: keys.sinkKey,
      LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: publicKeyEntryOf(parseCapabilitySigningKey(keys.capability)),
      ...env,
    },
  });
}

export async function startStack(opts: StackOptions): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), `leasehold-bench-${opts.name}-`));
  const keys: StackKeys = {
    sinkKey: secret(),
    capability: `k1:${generateCapabilitySeed(randomBytes)}`,
    workerKey: secret(),
    adminKey: secret(),
  };
  const prefix = `bench-${opts.name}-${randomBytes(4).toString('hex')}/`;
  const sink = await startSinkProcess(dir, keys, opts.name);
  const env = {
    LEASEHOLD_COORDINATOR_COORDINATOR_ID: `bench-${opts.name}`,
    LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: opts.etcd.endpoint,
    LEASEHOLD_COORDINATOR_PREFIX: prefix,
    LEASEHOLD_COORDINATOR_SINK_URL: sink.url,
    LEASEHOLD_COORDINATOR_SINK_KEY: keys.sinkKey,
    LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: keys.capability,
    LEASEHOLD_COORDINATOR_WORKER_KEYS: keys.workerKey,
    LEASEHOLD_COORDINATOR_ADMIN_KEYS: keys.adminKey,
    LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(opts.sessionTtlMs),
    LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: String(opts.heartbeatIntervalMs),
    LEASEHOLD_COORDINATOR_LOG_LEVEL: 'info',
    // One coordinator, no peer to hand sessions to: the default give-up (TTL / 2, 250 ms in the
    // takeover suite) closed every socket whenever a busy shared machine delayed one etcd probe.
    LEASEHOLD_COORDINATOR_ETCD_GIVE_UP_MS: '5000',
    ...benchCoordinatorEnv(),
    ...opts.coordinatorEnv,
  };
  let starts = 0;
  const startCoordinator = (readyPath?: string, timeoutMs?: number, peer?: number) =>
    startNodeDaemon({
      name: peer === undefined ? 'coordinator' : `coordinator-${peer}`,
      script: COORDINATOR_MAIN,
      dir,
      nodeArgs: profileArgs('coordinator', `${opts.name}-${starts++}`),
      env: peer === undefined ? env : { ...env, LEASEHOLD_COORDINATOR_COORDINATOR_ID: `bench-${opts.name}-${peer}` },
      stderrPath: join(dir, peer === undefined ? 'coordinator.stderr' : `coordinator-${peer}.stderr`),
      ...(readyPath === undefined ? {} : { readyPath }),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
  let coordinator: NodeDaemon | undefined;
  const peers: NodeDaemon[] = [];
  try {
    coordinator = await startCoordinator(undefined, opts.startTimeoutMs);
    for (let n = 2; n <= (opts.coordinators ?? 1); n++) {
      peers.push(await startCoordinator('/readyz', opts.startTimeoutMs, n));
    }
  } catch (err) {
    for (const peer of peers) await peer.stop();
    await coordinator?.stop();
    await sink.stop();
    throw err;
  }
  return {
    keys,
    sink,
    get coordinator(): NodeDaemon {
      if (coordinator === undefined) throw new Error(`${opts.name}: the coordinator is down (its restart failed)`);
      return coordinator;
    },
    peers,
    prefix,
    async restartCoordinator(timeoutMs) {
      const old = coordinator;
      coordinator = undefined;
      if (old !== undefined) {
        killGroup(old.child, 'SIGKILL');
        await old.stop();
      }
      coordinator = await startCoordinator('/readyz', timeoutMs);
      return coordinator;
    },
    stop: async () => {
      for (const peer of peers) await peer.stop();
      await coordinator?.stop();
      await sink.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
