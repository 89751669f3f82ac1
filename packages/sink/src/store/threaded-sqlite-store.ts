/**
 * {@link FenceStore} over a {@link SqliteFenceStore} that lives in a worker thread.
 *
 * Why: better-sqlite3 is synchronous, so in the main thread every commit (its SQLite work and the
 * fsync of synchronous=FULL) stalls the HTTP event loop. Here the commit runs in the worker while
 * the main thread keeps parsing and authenticating requests; the group committer starts no new
 * batch while one is in flight, so what arrives meanwhile becomes the next batch (pipelining).
 * Semantics are those of SqliteFenceStore (same contract suite); acks still follow the commit.
 *
 * The worker script is the compiled `sqlite-worker.js`; when this module runs from TypeScript
 * sources (tests), the built copy in dist/ is used, so `tsc -b` must have run.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { FenceOp, OpDecision } from '../core/ops.js';
import { SchemaVersionError } from '../errors.js';
import type { DecisionPageRows, FenceStore, ResourcePageRows, ResultPageQuery, StoredResultRow } from './port.js';
import type { SqliteStoreOptions } from './sqlite-store.js';
import type { WorkerError, WorkerMethod, WorkerReply } from './sqlite-worker.js';

interface Pending {
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: Error) => void;
}

function workerScript(): string {
  const here = fileURLToPath(import.meta.url);
  const sibling = fileURLToPath(new URL('./sqlite-worker.js', import.meta.url));
  if (!here.endsWith('.ts')) return sibling;
  const built = fileURLToPath(new URL('../../dist/store/sqlite-worker.js', import.meta.url));
  if (!existsSync(built)) throw new Error(`${built} is missing: run \`npx tsc -b\` first`);
  return built;
}

function fromWorkerError(error: WorkerError): Error {
  if (error.name === 'SchemaVersionError') return new SchemaVersionError(error.message, error.foundVersion ?? 0);
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}

export class ThreadedSqliteStore implements FenceStore {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #open = true;

  private constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (reply: WorkerReply) => {
      if (!('id' in reply)) return;
      const pending = this.#pending.get(reply.id);
      this.#pending.delete(reply.id);
      if (reply.ok) pending?.resolve(reply.value);
      else pending?.reject(fromWorkerError(reply.error));
    });
    const fail = (err: Error) => {
      this.#open = false;
      for (const p of this.#pending.values()) p.reject(err);
      this.#pending.clear();
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      fail(new Error(`sqlite worker exited (${code})`));
    });
  }

  /**
   * Start the worker and open (and migrate) the database; rejects like SqliteFenceStore's constructor.
   * No `nowMs` or `rules`: functions do not cross to the thread (the sink uses the in-thread store then).
   */
  static open(options: Omit<SqliteStoreOptions, 'nowMs' | 'rules'>): Promise<ThreadedSqliteStore> {
    // execArgv: [] so a test runner's flags (e.g. `--conditions leasehold-source`) do not make the
    // worker resolve TypeScript sources.
    const worker = new Worker(workerScript(), { workerData: options, execArgv: [] });
    return new Promise((resolve, reject) => {
      const onExit = (code: number) => {
        reject(new Error(`sqlite worker exited during open (${code})`));
      };
      worker.once('error', reject);
      worker.once('exit', onExit);
      worker.once('message', (reply: WorkerReply) => {
        worker.off('error', reject);
        worker.off('exit', onExit);
        if ('ready' in reply && reply.ready) {
          resolve(new ThreadedSqliteStore(worker));
          return;
        }
        const error = 'error' in reply ? fromWorkerError(reply.error) : new Error('unexpected worker reply');
        void worker.terminate();
        reject(error);
      });
    });
  }

  #call<T>(method: WorkerMethod, args: readonly unknown[]): Promise<T> {
    if (!this.#open) return Promise.reject(new Error('store is closed'));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#worker.postMessage({ id, method, args });
    });
  }

  applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    return ops.length === 0 ? Promise.resolve([]) : this.#call('applyBatch', [ops]);
  }

  fenceOf(resource: string): Promise<bigint> {
    return this.#call('fenceOf', [resource]);
  }

  resourcePage(resource: string, query: ResultPageQuery): Promise<ResourcePageRows> {
    return this.#call('resourcePage', [resource, query]);
  }

  resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined> {
    return this.#call('resultOf', [resource, resultId]);
  }

  decisions(after: number, limit: number): Promise<DecisionPageRows> {
    return this.#call('decisions', [after, limit]);
  }

  lastSeq(): Promise<number> {
    return this.#call('lastSeq', []);
  }

  isOpen(): boolean {
    return this.#open;
  }

  async close(): Promise<void> {
    if (!this.#open) return;
    await this.#call('close', []);
    this.#open = false;
    await this.#worker.terminate();
  }
}
