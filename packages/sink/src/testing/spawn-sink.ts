/**
 * Spawn the BUILT sink (`dist/main.js`) as a real process for integration tests.
 *
 * The sink is started with `--port 0 --port-file <dir>/port-N`; the port is read from that file
 * (written atomically once the server listens). Keys come from {@link TEST_ENV}.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TEST_ENV } from './fixtures.js';

export const MAIN_JS = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

export interface SpawnedSink {
  readonly url: string;
  readonly port: number;
  readonly proc: ChildProcess;
  readonly exited: Promise<Exit>;
  /** stdout + stderr so far. */
  output(): string;
  kill(signal: NodeJS.Signals): void;
}

export interface SpawnOptions {
  readonly dir: string;
  readonly dbPath: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly args?: readonly string[];
  readonly startTimeoutMs?: number;
}

let counter = 0;

function start(args: readonly string[], env: Readonly<Record<string, string>>) {
  if (!existsSync(MAIN_JS)) throw new Error(`${MAIN_JS} is missing: run \`npx tsc -b\` first`);
  const proc = spawn(process.execPath, [MAIN_JS, ...args], {
    env: { PATH: process.env.PATH ?? '', ...TEST_ENV, LEASEHOLD_SINK_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  proc.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  proc.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<Exit>((resolve) => {
    proc.once('exit', (code, signal) => {
      resolve({ code, signal });
    });
  });
  return { proc, exited, output: () => output };
}

/** Start the sink and wait until it listens. */
export async function spawnSink(options: SpawnOptions): Promise<SpawnedSink> {
  const portFile = join(options.dir, `port-${process.pid}-${++counter}`);
  const args = ['--port', '0', '--port-file', portFile, '--db-path', options.dbPath, ...(options.args ?? [])];
  const { proc, exited, output } = start(args, options.env ?? {});
  let exit: Exit | undefined;
  void exited.then((e) => (exit = e));
  const deadline = Date.now() + (options.startTimeoutMs ?? 30_000);
  while (!existsSync(portFile)) {
    if (exit !== undefined) throw new Error(`sink exited during start (${JSON.stringify(exit)}):\n${output()}`);
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`sink did not start in time:\n${output()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const port = Number(readFileSync(portFile, 'utf8').trim());
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    proc,
    exited,
    output,
    kill: (signal) => {
      if (exit === undefined) proc.kill(signal);
    },
  };
}

/** Run the sink expecting it to exit by itself (help, bad config, refused database). */
export async function runSinkToExit(
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
  timeoutMs = 10_000,
): Promise<Exit & { output: string }> {
  const { proc, exited, output } = start(args, env);
  const timer = setTimeout(() => proc.kill('SIGKILL'), timeoutMs);
  const exit = await exited;
  clearTimeout(timer);
  return { ...exit, output: output() };
}
