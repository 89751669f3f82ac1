/**
 * The PostgreSQL server of `leasehold cluster up --sink-store postgres` when no `--database-url`
 * is given: a private cluster in `<data-dir>/postgres` (initdb on the first run, reused after),
 * started in the foreground as a managed process, with `fsync=on` and `synchronous_commit=on`
 * (what the sink's acknowledgements rely on). It never touches a system cluster.
 *
 * No TCP listener at all (`listen_addresses=''`): the sinks reach it over its Unix socket in
 * `<data-dir>/postgres/sock` (the port of the cluster's state only names the socket file), a
 * directory and socket only the server's user (and root) may open. Nothing crosses a network, so
 * there is nothing for TLS to protect, and no other local user can connect.
 *
 * PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user (the
 * Debian package creates it) through `setpriv`, which execs in place: signals reach the server.
 * Trust authentication behind that socket: a demo cluster on one machine, not a deployment
 * (docs/operations.md says how to point the sinks at a real server, with TLS).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ManagedProcess } from './local-cluster.js';

const SERVER_USER = 'postgres';

/** The server binaries' directory (LEASEHOLD_PG_BIN_DIR, else the newest /usr/lib/postgresql/N/bin). */
export function findPostgresBinDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const explicit = env.LEASEHOLD_PG_BIN_DIR;
  if (explicit !== undefined && explicit !== '') return existsSync(join(explicit, 'postgres')) ? explicit : undefined;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const major = readdirSync(root)
    .filter((name) => /^[0-9]+$/.test(name) && existsSync(join(root, name, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a))[0];
  return major === undefined ? undefined : join(root, major, 'bin');
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

/** `[command, args]` running `bin` as the server user when this process is root. */
function asServerUser(bin: string, args: readonly string[]): [string, string[]] {
  if (!isRoot()) return [bin, [...args]];
  return ['setpriv', ['--reuid', SERVER_USER, '--regid', SERVER_USER, '--init-groups', '--', bin, ...args]];
}

function idOf(flag: '-u' | '-g'): number {
  const res = spawnSync('id', [flag, SERVER_USER], { encoding: 'utf8' });
  if (res.status !== 0)
    throw new Error(
      `PostgreSQL cannot run as root and there is no '${SERVER_USER}' user: create one, or run as a user`,
    );
  return Number(res.stdout.trim());
}

export interface LocalPostgresServer {
  readonly process: ManagedProcess;
  /** postgres:///postgres?host=<socket dir>&port=PORT&user=postgres (the Unix socket, no TCP) */
  readonly url: string;
}

/** initdb (first run only) and start the server; resolves once it accepts connections. */
export async function startLocalPostgres(
  dataDir: string,
  port: number,
  out: NodeJS.WritableStream,
): Promise<LocalPostgresServer> {
  const binDir = findPostgresBinDir();
  if (binDir === undefined) {
    throw new Error(
      'PostgreSQL server binaries not found: install them (apt-get install postgresql), set LEASEHOLD_PG_BIN_DIR, ' +
        'or pass --database-url to use a running server',
    );
  }
  const root = join(dataDir, 'postgres');
  const data = join(root, 'data');
  const sockets = join(root, 'sock');
  mkdirSync(sockets, { recursive: true });
  chmodSync(sockets, 0o700);
  if (isRoot()) {
    const [uid, gid] = [idOf('-u'), idOf('-g')];
    for (const path of [root, sockets]) chownSync(path, uid, gid);
    const [cmd, args] = asServerUser('test', ['-w', root]);
    if (spawnSync(cmd, args).status !== 0) {
      throw new Error(
        `the '${SERVER_USER}' user cannot reach ${root} (PostgreSQL cannot run as root, so it runs as ` +
          `'${SERVER_USER}'): every directory above it must be traversable (o+x); pick another --data-dir ` +
          `(e.g. under /var/tmp), run as another user, or pass --database-url`,
      );
    }
  }
  if (!existsSync(join(data, 'PG_VERSION'))) {
    const [cmd, args] = asServerUser(join(binDir, 'initdb'), [
      '-D', data, '-U', SERVER_USER, '--auth=trust', '-E', 'UTF8', '--no-locale',
    ]); // prettier-ignore
    const res = spawnSync(cmd, args, { encoding: 'utf8' });
    if (res.status !== 0) throw new Error(`initdb failed: ${res.stderr || res.stdout}`);
  }
  const [cmd, args] = asServerUser(join(binDir, 'postgres'), [
    '-D', data,
    '-c', 'listen_addresses=', '-c', `port=${port}`, '-c', `unix_socket_directories=${sockets}`,
    '-c', 'unix_socket_permissions=0700',
    '-c', 'fsync=on', '-c', 'synchronous_commit=on', '-c', 'log_min_messages=warning',
  ]); // prettier-ignore
  const server = new ManagedProcess('postgres', cmd, args, {}, 4, out);
  const query = new URLSearchParams({ host: sockets, port: String(port), user: SERVER_USER });
  const url = `postgres:///postgres?${query.toString()}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (serverReady(data, server.child.pid)) return { process: server, url };
    if (!server.running) throw new Error(`postgres exited during start-up (see its lines above)`);
    if (Date.now() > deadline) {
      await server.stop();
      throw new Error('postgres did not accept connections within 30 s');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Whether the server we started says it accepts connections: line 1 of `postmaster.pid` is its pid
 * and line 8 its state, `ready` once connections are accepted (what `pg_ctl -w` waits on). Read
 * rather than connecting: a probe connection while the server starts up is refused with a FATAL
 * line in its log, which is a false complaint. A stale file of an earlier server carries another pid.
 */
export function serverReady(data: string, pid: number | undefined): boolean {
  let lines: string[];
  try {
    lines = readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return false;
  }
  return pid !== undefined && Number(lines[0]) === pid && lines[7]?.trim() === 'ready';
}
