/**
 * Load generators and workers in their own processes (so their CPU is theirs, not the bench's, and
 * the bench's event loop never sits between a server and its load). A child is a compiled script in
 * `bench/dist/procs/`, spoken to over Node IPC with one small protocol:
 *
 *   parent → child  { type: 'start', ...params }  child → parent { type: 'started' }
 *   parent → child  { type: 'sample', mark? }     child → parent { type: 'sample', ops, errors }
 *   parent → child  { type: 'stop' }              child → parent { type: 'stopped', ...summary }
 *   child → parent  { type: 'done', n }           (workers: completions since the last message)
 *   child → parent  { type: 'failed', message }   (then it exits 1)
 *
 * `ops`/`errors` are cumulative since `start`; `mark: 'begin' | 'end'` brackets the measured window
 * for children that also record latencies. See procs/protocol.ts for the child side.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { track } from './daemon.js';

export interface ChildMessage {
  readonly type: string;
  readonly [field: string]: unknown;
}

export const PROCS_DIR = fileURLToPath(new URL('../procs/', import.meta.url));

export class NodeChild {
  readonly child: ChildProcess;
  readonly name: string;
  onMessage: (m: ChildMessage) => void = () => undefined;
  readonly #waiters: { type: string; resolve: (m: ChildMessage) => void; reject: (e: Error) => void }[] = [];
  #exit: Error | undefined;

  constructor(script: string, name: string, nodeArgs: readonly string[] = []) {
    this.name = name;
    const verbose = process.env.LEASEHOLD_BENCH_VERBOSE !== undefined;
    this.child = fork(`${PROCS_DIR}${script}`, [], {
      execArgv: [...nodeArgs],
      stdio: ['ignore', 'ignore', verbose ? 'inherit' : 'ignore', 'ipc'],
      serialization: 'json',
    });
    track(this.child);
    this.child.on('message', (raw: ChildMessage) => {
      if (raw.type === 'failed') {
        this.#fail(new Error(`${name}: ${String(raw.message)}`));
        return;
      }
      const at = this.#waiters.findIndex((w) => w.type === raw.type);
      if (at >= 0) {
        const [w] = this.#waiters.splice(at, 1);
        w?.resolve(raw);
      } else {
        this.onMessage(raw);
      }
    });
    this.child.once('exit', (code, signal) => {
      this.#fail(new Error(`${name} exited (${code ?? signal ?? '?'})`));
    });
  }

  get pid(): number {
    return this.child.pid ?? 0;
  }

  #fail(err: Error): void {
    this.#exit ??= err;
    for (const w of this.#waiters.splice(0)) w.reject(err);
  }

  /** Send `message` and wait for the reply of type `replyType`. */
  request(message: ChildMessage, replyType: string, timeoutMs = 60_000): Promise<ChildMessage> {
    if (this.#exit !== undefined) return Promise.reject(this.#exit);
    return new Promise<ChildMessage>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`${this.name}: no ${replyType} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.#waiters.push({
        type: replyType,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      this.child.send(message);
    });
  }

  /** Close the IPC channel (the child exits by itself, writing its --cpu-prof); SIGKILL after 5 s. */
  async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}
