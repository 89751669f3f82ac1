/**
 * A throwaway PostgreSQL cluster for tests and benchmarks, from the server binaries (Debian's
 * `postgresql` package: /usr/lib/postgresql/<major>/bin): `initdb` into a temp dir, `pg_ctl start`
 * on a free loopback port (TCP on 127.0.0.1 only; the Unix socket in the temp dir), `pg_ctl stop`.
 *
 * PostgreSQL refuses to run as root, so when this process is root every server command runs as the
 * `postgres` system user through `runuser` (the user is created when missing) and the temp dir is
 * chowned to it. The cluster keeps `fsync=on` and `synchronous_commit=on`: what tests and benchmarks
 * measure is what production gets. Nothing here touches a system cluster (/var/lib/postgresql).
 *
 * With `tls`, the server serves TLS with the given certificate (copied into the cluster's directory,
 * owned by the server's user, 0600: PostgreSQL refuses a key others can read) and, with
 * `tls.required`, refuses TCP connections without it (`hostssl` lines in pg_hba.conf); the admin
 * URL is then the Unix socket's, which stays open to the server's own tools.
 *
 * `stopImmediate()` is `pg_ctl stop -m immediate` (a crash: no checkpoint; recovery replays the
 * WAL on the next start), `start()` starts it again on the same port and data dir. `stopSync()` is
 * for exit handlers (synchronous). The caller owns cleanup: see test/harness/postgres.ts.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

export interface LocalPostgres {
  /**
   * postgres://postgres@127.0.0.1:PORT/postgres (trust auth on loopback); with `tls.required`, the
   * Unix socket's URL ({@link socketUrl}).
   */
  readonly adminUrl: string;
  /** postgres:///postgres?host=<socket dir>&port=PORT&user=postgres: the Unix socket (trust auth). */
  readonly socketUrl: string;
  readonly port: number;
  readonly dataDir: string;
  readonly logFile: string;
  /** `pg_ctl stop -m immediate`: a crash of the server; acknowledged commits survive it. */
  stopImmediate(): Promise<void>;
  /** Start again (same port, same data); resolves once it accepts connections. */
  start(): Promise<void>;
  /** True while the postmaster runs. */
  running(): boolean;
  /** Stop (fast mode) and remove the temp dir. Idempotent. */
  stop(): Promise<void>;
  /** Synchronous stop (immediate) and removal, for `process.on('exit')`. Idempotent. */
  stopSync(): void;
}

export interface LocalPostgresOptions {
  /** Directory holding initdb and pg_ctl. Default: LEASEHOLD_PG_BIN_DIR, else the newest /usr/lib/postgresql/<n>/bin. */
  readonly binDir?: string;
  /** Extra `-c name=value` server settings. */
  readonly settings?: Readonly<Record<string, string>>;
  /** Extra pg_hba.conf lines, e.g. `host all all 10.77.5.0/24 trust` (network namespaces of a chaos run). */
  readonly hbaLines?: readonly string[];
  readonly startTimeoutMs?: number;
  /** Serve TLS with this certificate and key (PEM files); `required`: no TCP connection without TLS. */
  readonly tls?: { readonly certFile: string; readonly keyFile: string; readonly required?: boolean };
}

const SERVER_USER = 'postgres';

/** The server binaries' directory, or undefined when PostgreSQL is not installed. */
export function findPostgresBinDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.LEASEHOLD_PG_BIN_DIR;
  if (explicit !== undefined && explicit !== '') return existsSync(join(explicit, 'pg_ctl')) ? explicit : undefined;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((name) => /^[0-9]+$/.test(name) && existsSync(join(root, name, 'bin', 'pg_ctl')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(root, majors[0], 'bin');
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => {
        resolve(port);
      });
    });
  });
}

const isRoot = (): boolean => typeof process.getuid === 'function' && process.getuid() === 0;

function idOf(flag: '-u' | '-g'): number {
  const out = spawnSync('id', [flag, SERVER_USER], { encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`no ${SERVER_USER} user: ${out.stderr}`);
  return Number(out.stdout.trim());
}

/** As root: make sure the unprivileged server user exists (Debian's package creates it). */
function ensureServerUser(): void {
  if (spawnSync('id', ['-u', SERVER_USER]).status === 0) return;
  const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', SERVER_USER], {
    encoding: 'utf8',
  });
  if (made.status !== 0) throw new Error(`could not create the ${SERVER_USER} user: ${made.stderr}`);
}

/** Run a server binary, as the server user when we are root. Throws with its output on failure. */
function run(bin: string, args: readonly string[], timeoutMs = 60_000): string {
  const [cmd, argv] = isRoot() ? ['runuser', ['-u', SERVER_USER, '--', bin, ...args]] : [bin, [...args]];
  const out = spawnSync(cmd, argv, { encoding: 'utf8', timeout: timeoutMs, stdio: ['ignore', 'pipe', 'pipe'] });
  if (out.status !== 0) {
    throw new Error(`${bin} ${args.join(' ')} failed (${out.status ?? out.signal}): ${out.stdout}${out.stderr}`);
  }
  return out.stdout;
}

/**
 * {@link run} without blocking the event loop: a crashed server's start replays its WAL for seconds,
 * and a caller that also forwards traffic (the chaos runner's fault proxies) must keep serving.
 */
function runAsync(bin: string, args: readonly string[], timeoutMs = 60_000): Promise<string> {
  const [cmd, argv] = isRoot() ? ['runuser', ['-u', SERVER_USER, '--', bin, ...args]] : [bin, [...args]];
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      if (code === 0) resolve(out);
      else reject(new Error(`${bin} ${args.join(' ')} failed (${code ?? signal ?? '?'}): ${out}`));
    });
  });
}

async function waitAccepting(url: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 1000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`postgres at ${url} not accepting connections after ${timeoutMs} ms: ${last}`);
}

/** The server's certificate and key in `root`, readable by the server's user only; `required`: hostssl. */
function installTls(root: string, dataDir: string, tls: NonNullable<LocalPostgresOptions['tls']>): void {
  for (const [from, to] of [
    [tls.certFile, 'server.crt'],
    [tls.keyFile, 'server.key'],
  ] as const) {
    const file = join(root, to);
    copyFileSync(from, file);
    chmodSync(file, 0o600);
    if (isRoot()) chownSync(file, idOf('-u'), idOf('-g'));
  }
  if (tls.required !== true) return;
  const hba = join(dataDir, 'pg_hba.conf');
  const lines = readFileSync(hba, 'utf8').split('\n');
  writeFileSync(hba, lines.map((l) => l.replace(/^host(\s)/, 'hostssl$1')).join('\n'));
}

/** initdb + pg_ctl start a fresh cluster. Throws if the binaries are missing. */
export async function startLocalPostgres(options: LocalPostgresOptions = {}): Promise<LocalPostgres> {
  const binDir = options.binDir ?? findPostgresBinDir();
  if (binDir === undefined) throw new Error('PostgreSQL server binaries not found (apt-get install postgresql)');
  const root = mkdtempSync(join(tmpdir(), 'leasehold-pg-'));
  const dataDir = join(root, 'data');
  const socketDir = join(root, 'sock');
  const logFile = join(root, 'server.log');
  mkdirSync(socketDir);
  if (isRoot()) {
    ensureServerUser();
    const [uid, gid] = [idOf('-u'), idOf('-g')];
    for (const path of [root, socketDir]) chownSync(path, uid, gid);
  }
  const port = await freePort();
  const pgCtl = join(binDir, 'pg_ctl');
  const tls = options.tls;
  const settings: Record<string, string> = {
    listen_addresses: '127.0.0.1',
    port: String(port),
    unix_socket_directories: socketDir,
    fsync: 'on',
    synchronous_commit: 'on',
    max_connections: '200',
    log_min_messages: 'warning',
    ...(tls === undefined
      ? {}
      : { ssl: 'on', ssl_cert_file: join(root, 'server.crt'), ssl_key_file: join(root, 'server.key') }),
    ...options.settings,
  };
  const serverArgs = Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(' ');
  const socketUrl = `postgres:///postgres?${new URLSearchParams({ host: socketDir, port: String(port), user: SERVER_USER }).toString()}`;
  const adminUrl = tls?.required === true ? socketUrl : `postgres://${SERVER_USER}@127.0.0.1:${port}/postgres`;
  const timeoutMs = options.startTimeoutMs ?? 30_000;
  let removed = false;
  let up = false;

  const startServer = async (): Promise<void> => {
    await runAsync(
      pgCtl,
      ['-D', dataDir, '-l', logFile, '-o', serverArgs, '-w', '-t', String(timeoutMs / 1000), 'start'],
      timeoutMs,
    );
    up = true;
    await waitAccepting(adminUrl, timeoutMs);
  };
  const stopServer = (mode: 'fast' | 'immediate'): void => {
    if (!up) return;
    run(pgCtl, ['-D', dataDir, '-m', mode, '-w', 'stop']);
    up = false;
  };

  try {
    run(join(binDir, 'initdb'), [
      '-D',
      dataDir,
      '-U',
      SERVER_USER,
      '--auth=trust',
      '-E',
      'UTF8',
      '--no-locale',
      '--no-sync',
    ]);
    if (options.hbaLines !== undefined && options.hbaLines.length > 0)
      appendFileSync(join(dataDir, 'pg_hba.conf'), `${options.hbaLines.join('\n')}\n`);
    if (tls !== undefined) installTls(root, dataDir, tls);
    await startServer();
  } catch (err) {
    try {
      stopServer('immediate');
    } catch {
      // nothing to stop
    }
    rmSync(root, { recursive: true, force: true });
    throw err;
  }

  const remove = (mode: 'fast' | 'immediate'): void => {
    if (removed) return;
    removed = true;
    try {
      stopServer(mode);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  };
  return {
    adminUrl,
    socketUrl,
    port,
    dataDir,
    logFile,
    stopImmediate: async () => {
      if (!up) return;
      await runAsync(pgCtl, ['-D', dataDir, '-m', 'immediate', '-w', 'stop']);
      up = false;
    },
    start: () => (up ? Promise.resolve() : startServer()),
    running: () => up,
    stop: () => {
      remove('fast');
      return Promise.resolve();
    },
    stopSync: () => {
      remove('immediate');
    },
  };
}
