/**
 * A real PostgreSQL for tests.
 *
 * Order of preference:
 * 1. `LEASEHOLD_PG_URL` (a superuser URL, e.g. postgres://postgres@127.0.0.1:5432/postgres): use
 *    that server, start nothing; every handle gets its own fresh database, dropped by `stop()`.
 * 2. The server binaries (Debian's `postgresql` package; `LEASEHOLD_PG_BIN_DIR` to choose):
 *    `initdb` + `pg_ctl` a throwaway cluster on a free loopback port in a temp dir (as the
 *    `postgres` user when we are root), see @leasehold/devkit `startLocalPostgres`. It is stopped
 *    by `stop()`, and also when the test process exits or gets SIGTERM / SIGINT / SIGHUP.
 * 3. No binaries but a Docker engine answers: a `postgres:15` container (@testcontainers/postgresql).
 *    Not exercised on machines without Docker (like the CI machine of this project).
 * Otherwise it fails with a message saying what to install.
 *
 * `stopImmediate()` / `start()` (binary mode only) crash and restart the server on the same port
 * and data: `pg_ctl stop -m immediate`, then `pg_ctl start`.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { findPostgresBinDir, startLocalPostgres, type LocalPostgres } from '@leasehold/devkit';
import pg from 'pg';

export interface PostgresHandle {
  /** URL of this handle's own fresh database. */
  readonly url: string;
  /** How this PostgreSQL came to be. */
  readonly source: 'external' | 'binary' | 'container';
  /** True when `stopImmediate` / `start` work (binary mode). */
  readonly canRestart: boolean;
  /** Another fresh database on the same server; dropped by `stop()`. */
  createDatabase(): Promise<string>;
  /** Drop the `leasehold` schema of `url` (a clean slate for the next test). */
  resetSchema(url?: string): Promise<void>;
  /** `pg_ctl stop -m immediate` (binary mode). */
  stopImmediate(): Promise<void>;
  /** Start again after `stopImmediate` (binary mode). */
  start(): Promise<void>;
  stop(): Promise<void>;
}

const live = new Set<LocalPostgres>();
let hooked = false;

/** Stop every local cluster when the test process exits, whatever the reason. */
function track(cluster: LocalPostgres): void {
  live.add(cluster);
  if (hooked) return;
  hooked = true;
  const stopAll = () => {
    for (const c of live) c.stopSync();
    live.clear();
  };
  process.once('exit', stopAll);
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) {
    process.once(signal, () => {
      stopAll();
      process.kill(process.pid, signal);
    });
  }
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}

async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function databaseMaker(adminUrl: string) {
  const made: string[] = [];
  return {
    made,
    create: async (): Promise<string> => {
      const name = `leasehold_test_${randomBytes(6).toString('hex')}`;
      await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
      made.push(name);
      return withDatabase(adminUrl, name);
    },
    dropAll: async (): Promise<void> => {
      for (const name of made.splice(0)) {
        await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      }
    },
  };
}

export async function resetSchema(url: string): Promise<void> {
  await adminQuery(url, 'DROP SCHEMA IF EXISTS leasehold CASCADE');
}

function dockerAnswers(): boolean {
  const probe = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { timeout: 5_000, encoding: 'utf8' });
  return probe.status === 0 && probe.stdout.trim() !== '';
}

export async function startPostgres(): Promise<PostgresHandle> {
  const external = process.env.LEASEHOLD_PG_URL;
  if (external !== undefined && external.trim() !== '') return useServer(external.trim(), 'external', async () => {});
  if (findPostgresBinDir() !== undefined) {
    const cluster = await startLocalPostgres();
    track(cluster);
    return useServer(
      cluster.adminUrl,
      'binary',
      () => {
        live.delete(cluster);
        return cluster.stop();
      },
      cluster,
    );
  }
  if (dockerAnswers()) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const container = await new PostgreSqlContainer('postgres:15').start();
    return useServer(container.getConnectionUri(), 'container', async () => {
      await container.stop();
    });
  }
  throw new Error(
    'No PostgreSQL available for tests. Install the server (Debian/Ubuntu: `apt-get install -y postgresql`, ' +
      'or run `pnpm bootstrap`), set LEASEHOLD_PG_BIN_DIR to its bin directory, or set LEASEHOLD_PG_URL to a ' +
      'superuser URL of a running server.',
  );
}

async function useServer(
  adminUrl: string,
  source: PostgresHandle['source'],
  shutdown: () => Promise<void>,
  cluster?: LocalPostgres,
): Promise<PostgresHandle> {
  const databases = databaseMaker(adminUrl);
  const url = await databases.create();
  const unsupported = (): never => {
    throw new Error(`a ${source} PostgreSQL cannot be crashed and restarted by tests`);
  };
  return {
    url,
    source,
    canRestart: cluster !== undefined,
    createDatabase: databases.create,
    resetSchema: (target = url) => resetSchema(target),
    stopImmediate: () => (cluster === undefined ? unsupported() : cluster.stopImmediate()),
    start: () => (cluster === undefined ? unsupported() : cluster.start()),
    stop: async () => {
      if (cluster === undefined || cluster.running()) await databases.dropAll();
      await shutdown();
    },
  };
}

/** Connections a `testPool` has open, and who waits for them to close. */
const poolState = new WeakMap<pg.Pool, { open: number; idle: Array<() => void> }>();

/**
 * A `pg.Pool` for a test's own queries (balances, tables), that `closePool` can end completely.
 *
 * `pool.end()` resolves once it has asked every client to end, not once their connections closed. A
 * database dropped `WITH (FORCE)` or a server stopped right after (the handle's `stop()`) sends each
 * backend still closing a FATAL 57P01, which the client hands to the pool's idle listener and the
 * pool re-emits as `'error'`: with no listener, an uncaught exception that fails the whole test file
 * after every test passed. The listener below takes such late errors (a pool's idle clients have no
 * query to fail); `closePool` waits for the connections themselves.
 */
export function testPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  const state = { open: 0, idle: [] as Array<() => void> };
  poolState.set(pool, state);
  pool.on('error', () => undefined);
  pool.on('connect', () => state.open++);
  pool.on('remove', () => {
    state.open--;
    if (state.open === 0) for (const wake of state.idle.splice(0)) wake();
  });
  return pool;
}

/** `pool.end()`, then wait (at most `timeoutMs`) until every connection of a `testPool` closed. */
export async function closePool(pool: pg.Pool, timeoutMs = 10_000): Promise<void> {
  const state = poolState.get(pool);
  if (state === undefined) throw new Error('closePool takes a pool made by testPool');
  await pool.end();
  if (state.open === 0) return;
  let timer: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      state.idle.push(resolve);
      timer = setTimeout(() => {
        reject(new Error(`${state.open} connection(s) of a test pool still open ${timeoutMs} ms after end()`));
      }, timeoutMs);
    });
  } finally {
    clearTimeout(timer);
  }
}
