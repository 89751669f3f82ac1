/**
 * Worker-thread entry of {@link ThreadedSqliteStore}: owns the SQLite connection and runs every
 * store call, so a commit's fsync blocks this thread, not the HTTP event loop. Protocol:
 *   in:  { id, method, args }                       one FenceStore call
 *   out: { id, ok: true, value } | { id, ok: false, error }
 *   out: { ready: true } once the database is open and migrated, or { ready: false, error }
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { FenceOp } from '../core/ops.js';
import { SchemaVersionError } from '../errors.js';
import type { ResultPageQuery } from './port.js';
import { SqliteFenceStore, type SqliteStoreOptions } from './sqlite-store.js';

export interface WorkerError {
  readonly name: string;
  readonly message: string;
  readonly foundVersion?: number;
}

export type WorkerMethod = 'applyBatch' | 'fenceOf' | 'resourcePage' | 'resultOf' | 'decisions' | 'lastSeq' | 'close';

export interface WorkerCall {
  readonly id: number;
  readonly method: WorkerMethod;
  readonly args: readonly unknown[];
}

export type WorkerReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: WorkerError }
  | { readonly ready: true }
  | { readonly ready: false; readonly error: WorkerError };

function toWorkerError(err: unknown): WorkerError {
  if (err instanceof SchemaVersionError)
    return { name: err.name, message: err.message, foundVersion: err.foundVersion };
  if (err instanceof Error) return { name: err.name, message: err.message };
  return { name: 'Error', message: String(err) };
}

const port = parentPort;
if (port === null) throw new Error('sqlite-worker must run in a worker thread');

let store: SqliteFenceStore | undefined;
try {
  store = new SqliteFenceStore(workerData as SqliteStoreOptions);
  port.postMessage({ ready: true } satisfies WorkerReply);
} catch (err) {
  port.postMessage({ ready: false, error: toWorkerError(err) } satisfies WorkerReply);
}

function dispatch(s: SqliteFenceStore, call: WorkerCall): Promise<unknown> {
  const [a, b] = call.args;
  switch (call.method) {
    case 'applyBatch':
      return s.applyBatch(a as readonly FenceOp[]);
    case 'fenceOf':
      return s.fenceOf(a as string);
    case 'resourcePage':
      return s.resourcePage(a as string, b as ResultPageQuery);
    case 'resultOf':
      return s.resultOf(a as string, b as string);
    case 'decisions':
      return s.decisions(a as number, b as number);
    case 'lastSeq':
      return s.lastSeq();
    case 'close':
      return s.close();
  }
}

port.on('message', (call: WorkerCall) => {
  const s = store;
  if (s === undefined) return;
  dispatch(s, call).then(
    (value) => {
      port.postMessage({ id: call.id, ok: true, value } satisfies WorkerReply);
      if (call.method === 'close') port.close();
    },
    (err: unknown) => {
      port.postMessage({ id: call.id, ok: false, error: toWorkerError(err) } satisfies WorkerReply);
    },
  );
});
