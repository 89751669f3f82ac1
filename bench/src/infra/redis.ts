/**
 * A Redis server for the BullMQ peer: Debian's `redis-server` (REDIS_SERVER_BIN or on PATH) on a
 * free loopback port with a temp dir, AOF on with the given `appendfsync` (`always`: every write
 * fsynced before the reply, the durability the leasehold sink gives; `everysec`: what most BullMQ
 * deployments run), RDB snapshots off. Killed when the bench exits.
 */
import { spawn } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freePort, sleep, stopChild, track } from './daemon.js';

export interface Redis {
  readonly port: number;
  readonly pid: number;
  stop(): Promise<void>;
}

export function findRedis(): string | undefined {
  const explicit = process.env.REDIS_SERVER_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, 'redis-server'), constants.X_OK);
      return join(dir, 'redis-server');
    } catch {
      // not here
    }
  }
  return undefined;
}

function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.setTimeout(500);
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('data', (d) => {
      socket.destroy();
      resolve(d.toString().startsWith('+PONG'));
    });
    socket.once('error', () => {
      resolve(false);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export async function startRedis(appendfsync: 'always' | 'everysec'): Promise<Redis> {
  const bin = findRedis();
  if (bin === undefined) throw new Error('redis-server not found (apt-get install redis-server, or REDIS_SERVER_BIN)');
  const dir = mkdtempSync(join(tmpdir(), `leasehold-bench-redis-${appendfsync}-`));
  const port = await freePort();
  const child = spawn(
    bin,
    [
      '--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '',
      '--appendonly', 'yes', '--appendfsync', appendfsync, '--daemonize', 'no', '--logfile', '',
    ], // prettier-ignore
    { detached: true, stdio: ['ignore', 'ignore', 'ignore'] },
  );
  track(child);
  const deadline = Date.now() + 10_000;
  while (!(await ping(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`redis-server (${appendfsync}) did not start`);
    }
    await sleep(50);
  }
  return {
    port,
    pid: child.pid ?? 0,
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
