/**
 * Spawn and stop benchmark processes: a node script (the built sink or coordinator, the hello
 * server) or a binary (etcd), each in its own process group, killed when the bench exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

const live = new Set<ChildProcess>();
let hooked = false;

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

export function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.once('exit', () => {
      for (const c of live) killGroup(c, 'SIGKILL');
    });
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** SIGTERM the group, SIGKILL after `graceMs`; resolves once exited. */
export async function stopChild(child: ChildProcess, graceMs = 5_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      resolve();
    }),
  );
  killGroup(child, 'SIGCONT');
  killGroup(child, 'SIGTERM');
  const timer = setTimeout(() => {
    killGroup(child, 'SIGKILL');
  }, graceMs);
  await exited;
  clearTimeout(timer);
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
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

export interface NodeDaemon {
  readonly child: ChildProcess;
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * Run `node [nodeArgs] script [args] --port 0 --port-file <dir>/<name>.port` and wait for the port.
 * stderr is inherited only when LEASEHOLD_BENCH_VERBOSE is set.
 */
export async function startNodeDaemon(opts: {
  readonly name: string;
  readonly script: string;
  readonly dir: string;
  readonly env: Readonly<Record<string, string>>;
  readonly args?: readonly string[];
  readonly nodeArgs?: readonly string[];
}): Promise<NodeDaemon> {
  if (!existsSync(opts.script)) throw new Error(`${opts.script} is missing: run \`pnpm build\` first`);
  const portFile = `${opts.dir}/${opts.name}.port`;
  rmSync(portFile, { force: true });
  const verbose = process.env.LEASEHOLD_BENCH_VERBOSE !== undefined;
  const child = spawn(
    process.execPath,
    [...(opts.nodeArgs ?? []), opts.script, ...(opts.args ?? []), '--port', '0', '--port-file', portFile],
    {
      detached: true,
      cwd: opts.dir,
      stdio: ['ignore', 'ignore', verbose ? 'inherit' : 'ignore'],
      env: { PATH: process.env.PATH ?? '', ...opts.env },
    },
  );
  track(child);
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${opts.name} exited with ${child.exitCode} during start-up`);
    if (existsSync(portFile)) {
      const text = readFileSync(portFile, 'utf8').trim();
      if (/^\d+$/.test(text)) {
        const port = Number(text);
        const url = `http://127.0.0.1:${port}`;
        if (await healthy(url)) {
          return { child, pid: child.pid ?? 0, port, url, stop: () => stopChild(child) };
        }
      }
    }
    if (Date.now() > deadline) {
      await stopChild(child);
      throw new Error(`${opts.name} did not start within 20 s`);
    }
    await sleep(20);
  }
}

async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(1_000) });
    return res.status === 200;
  } catch {
    return false;
  }
}
