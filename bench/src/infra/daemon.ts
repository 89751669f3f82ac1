/**
 * Spawn and stop benchmark processes: a node script (the built sink or coordinator, the hello
 * server) or a binary (etcd), each in its own process group, killed when the bench exits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

const live = new Set<ChildProcess>();
let hooked = false;

export function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
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
  /** ms from spawn until the ready probe answered 200. */
  readonly readyAfterMs: number;
  stop(): Promise<void>;
}

/** A daemon that did not come up: how long it was given, and the tail of its stderr. */
export class DaemonStartError extends Error {
  readonly afterMs: number;
  readonly exitCode: number | null;
  readonly stderrTail: string;
  constructor(message: string, afterMs: number, exitCode: number | null, stderrTail: string) {
    super(message);
    this.name = 'DaemonStartError';
    this.afterMs = afterMs;
    this.exitCode = exitCode;
    this.stderrTail = stderrTail;
  }
}

function tail(path: string | undefined, lines = 5): string {
  if (path === undefined) return '';
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/**
 * Run `node [nodeArgs] script [args] --port 0 --port-file <dir>/<name>.port` and wait for the port
 * and a 200 from `readyPath` (default `/healthz`; the scale suite times `/readyz`) within
 * `timeoutMs` (default 20 s). stderr goes to `stderrPath` when given (its tail is in the error of a
 * daemon that did not come up), else is inherited only when LEASEHOLD_BENCH_VERBOSE is set.
 */
export async function startNodeDaemon(opts: {
  readonly name: string;
  readonly script: string;
  readonly dir: string;
  readonly env: Readonly<Record<string, string>>;
  readonly args?: readonly string[];
  readonly nodeArgs?: readonly string[];
  readonly readyPath?: string;
  readonly timeoutMs?: number;
  readonly stderrPath?: string;
}): Promise<NodeDaemon> {
  if (!existsSync(opts.script)) throw new Error(`${opts.script} is missing: run \`pnpm build\` first`);
  const portFile = `${opts.dir}/${opts.name}.port`;
  rmSync(portFile, { force: true });
  const verbose = process.env.LEASEHOLD_BENCH_VERBOSE !== undefined;
  const stderrFd = opts.stderrPath === undefined ? undefined : openSync(opts.stderrPath, 'a');
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [...(opts.nodeArgs ?? []), opts.script, ...(opts.args ?? []), '--port', '0', '--port-file', portFile],
    {
      detached: true,
      cwd: opts.dir,
      stdio: ['ignore', 'ignore', stderrFd ?? (verbose ? 'inherit' : 'ignore')],
      env: { PATH: process.env.PATH ?? '', ...opts.env },
    },
  );
  if (stderrFd !== undefined) closeSync(stderrFd);
  track(child);
  const timeoutMs = opts.timeoutMs ?? 20_000;
  const readyPath = opts.readyPath ?? '/healthz';
  const failed = (why: string) =>
    new DaemonStartError(
      `${opts.name} ${why}${tail(opts.stderrPath) === '' ? '' : `: ${tail(opts.stderrPath)}`}`,
      performance.now() - t0,
      child.exitCode,
      tail(opts.stderrPath),
    );
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null)
      throw failed(`exited with ${child.exitCode ?? child.signalCode ?? '?'} during start-up`);
    if (existsSync(portFile)) {
      const text = readFileSync(portFile, 'utf8').trim();
      if (/^\d+$/.test(text)) {
        const port = Number(text);
        const url = `http://127.0.0.1:${port}`;
        if (await answers200(url, readyPath)) {
          const readyAfterMs = performance.now() - t0;
          // A profiled daemon writes its --cpu-prof at exit: tens of MB after a long suite, which
          // can take longer than the usual grace; a SIGKILL then loses the profile.
          const graceMs = opts.nodeArgs?.includes('--cpu-prof') === true ? 60_000 : 5_000;
          return { child, pid: child.pid ?? 0, port, url, readyAfterMs, stop: () => stopChild(child, graceMs) };
        }
      }
    }
    if (performance.now() - t0 > timeoutMs) {
      const err = failed(`did not answer ${readyPath} 200 within ${Math.round(timeoutMs / 1000)} s`);
      await stopChild(child);
      throw err;
    }
    await sleep(20);
  }
}

async function answers200(url: string, path: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(1_000) });
    return res.status === 200;
  } catch {
    return false;
  }
}
