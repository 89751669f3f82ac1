/**
 * A leasehold daemon (sink, coordinator, worker) as a real child process: spawned from the built
 * `dist/`, in its own process group, on a free port it reports through `--port-file`, with its
 * stdout/stderr kept in a log file. Can be stopped, SIGKILLed, SIGSTOPped and resumed, and
 * restarted with the same configuration (same port, same data).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, rmSync, type WriteStream } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signalGroup, stopProcess, track } from '@leasehold/devkit';
import { Agent, fetch as undiciFetch } from 'undici';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

export const BIN = {
  sink: join(REPO_ROOT, 'packages/sink/dist/main.js'),
  coordinator: join(REPO_ROOT, 'packages/coordinator/dist/main.js'),
  worker: join(REPO_ROOT, 'packages/cli/dist/worker-main.js'),
} as const;

export interface ServiceSpec {
  readonly name: string;
  readonly bin: string;
  readonly args?: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Directory for the port file and the log. */
  readonly dir: string;
  /** True for daemons that listen (sink, coordinator): wait for the port file and /healthz. */
  readonly listens: boolean;
  /** The daemon serves HTTPS with a certificate from this CA (PEM). */
  readonly ca?: Buffer;
  /** Address the daemon listens on and is reached at (default 127.0.0.1; a netns address in netns mode). */
  readonly host?: string;
  /** A fixed port (default: any free one on the first start, then the same one on restarts). */
  readonly port?: number;
  /** A command prefix the daemon is started under, e.g. `['ip', 'netns', 'exec', NS]`. */
  readonly launcher?: readonly string[];
}

export class Service {
  readonly spec: ServiceSpec;
  process: ChildProcess | undefined;
  port: number | undefined;
  readonly logPath: string;
  #log: WriteStream | undefined;
  #exits: { code: number | null; signal: NodeJS.Signals | null }[] = [];

  constructor(spec: ServiceSpec) {
    if (!existsSync(spec.bin)) throw new Error(`${spec.bin} is missing: run \`pnpm build\` first`);
    this.spec = spec;
    this.port = spec.port;
    this.logPath = join(spec.dir, `${spec.name}.log`);
  }

  get host(): string {
    return this.spec.host ?? '127.0.0.1';
  }

  get url(): string {
    if (this.port === undefined) throw new Error(`${this.spec.name} has no port yet`);
    return `${this.spec.ca === undefined ? 'http' : 'https'}://${this.host}:${this.port}`;
  }

  get pid(): number | undefined {
    return this.process?.pid;
  }

  isRunning(): boolean {
    return this.process !== undefined && this.process.exitCode === null && this.process.signalCode === null;
  }

  /** Exits seen so far (code or signal), oldest first. */
  get exits(): readonly { code: number | null; signal: NodeJS.Signals | null }[] {
    return this.#exits;
  }

  /** The command line and environment `start()` uses (also for scripts that start it elsewhere). */
  commandLine(): { readonly argv: readonly string[]; readonly env: Readonly<Record<string, string>> } {
    const args = [...(this.spec.args ?? [])];
    if (this.spec.listens) {
      args.push('--port-file', join(this.spec.dir, `${this.spec.name}.port`));
      // A restart reuses the port the service had, so peers' configuration stays valid.
      if (this.port !== undefined) args.push('--port', String(this.port));
    }
    return {
      argv: [...(this.spec.launcher ?? []), process.execPath, this.spec.bin, ...args],
      env: { PATH: process.env.PATH ?? '', ...this.spec.env },
    };
  }

  async start(timeoutMs = 20_000): Promise<void> {
    if (this.isRunning()) throw new Error(`${this.spec.name} is already running`);
    const portFile = join(this.spec.dir, `${this.spec.name}.port`);
    rmSync(portFile, { force: true });
    this.#log ??= createWriteStream(this.logPath, { flags: 'a' });
    const {
      argv: [command, ...argv],
      env,
    } = this.commandLine();
    const child = spawn(command!, argv, {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...env },
    });
    track(child);
    this.process = child;
    child.stdout.pipe(this.#log, { end: false });
    child.stderr.pipe(this.#log, { end: false });
    child.once('exit', (code, signal) => {
      this.#exits.push({ code, signal });
    });
    if (!this.spec.listens) return;
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (!this.isRunning())
        throw new Error(`${this.spec.name} exited during start-up; see ${this.logPath}:\n${this.tail()}`);
      if (existsSync(portFile)) {
        const text = readFileSync(portFile, 'utf8').trim();
        if (/^\d+$/.test(text)) {
          this.port = Number(text);
          if (await this.healthy()) return;
        }
      }
      await pollPause(25);
    }
    throw new Error(
      `${this.spec.name} did not become healthy in ${timeoutMs} ms; see ${this.logPath}:\n${this.tail()}`,
    );
  }

  async healthy(): Promise<boolean> {
    const ca = this.spec.ca;
    const dispatcher = ca === undefined ? undefined : new Agent({ connect: { ca } });
    try {
      const res = await undiciFetch(`${this.url}/healthz`, {
        signal: AbortSignal.timeout(1_000),
        ...(dispatcher === undefined ? {} : { dispatcher }),
      });
      return res.status === 200;
    } catch {
      return false;
    } finally {
      await dispatcher?.close();
    }
  }

  /** SIGTERM (after SIGCONT), SIGKILL after `graceMs`. */
  async stop(graceMs = 5_000): Promise<void> {
    if (this.process !== undefined) await stopProcess(this.process, graceMs);
  }

  async kill(): Promise<void> {
    const child = this.process;
    if (child === undefined || !this.isRunning()) return;
    const exited = new Promise<void>((r) =>
      child.once('exit', () => {
        r();
      }),
    );
    signalGroup(child, 'SIGKILL');
    await exited;
  }

  pause(): void {
    if (this.process !== undefined) signalGroup(this.process, 'SIGSTOP');
  }

  resume(): void {
    if (this.process !== undefined) signalGroup(this.process, 'SIGCONT');
  }

  /** The last lines of the log. */
  tail(lines = 30): string {
    if (!existsSync(this.logPath)) return '';
    return readFileSync(this.logPath, 'utf8').split('\n').slice(-lines).join('\n');
  }

  log(): string {
    return existsSync(this.logPath) ? readFileSync(this.logPath, 'utf8') : '';
  }

  close(): void {
    this.#log?.end();
    this.#log = undefined;
  }
}

/** The interval between two probes of a poll (of the port file, of `waitFor`'s state). */
function pollPause(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 20_000,
  everyMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: string | undefined;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined && value !== false) return value;
    } catch (err) {
      lastError = err instanceof Error ? err.message : JSON.stringify(err);
    }
    await pollPause(everyMs);
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError === undefined ? '' : `: ${lastError}`}`,
  );
}
