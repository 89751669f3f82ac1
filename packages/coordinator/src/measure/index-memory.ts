/**
 * What the coordinator's in-memory task index costs per pending task and per held lease, measured
 * (run by `bench/src/scale-index.ts`, or directly):
 *
 *   node --expose-gc packages/coordinator/dist/measure/index-memory.js --tasks 1000000 --leases 100000
 *
 * `--queues N` spreads the tasks over N named queues (`q0`…; default 1: every task in `default`,
 * whose records carry no queue field) and selects from `q0`.
 *
 * It makes N task records of layout v2 as a submit writes them (the installation's retry policy,
 * 64-byte payloads under `inputs/`, not in the record), takes them through the same parse the
 * snapshot and the watch use (`decodeTask` of the stored JSON, then `entryOf`), and builds the
 * index from them in snapshot pages; then it grants L of them (an owner key each, the task record
 * rewritten with its open attempt, and the grant the session keeps). Heap and RSS are read after
 * a full GC before and after each step. Prints one JSON object:
 *
 *   { tasks, leases, heapBytesPerTask, rssBytesPerTask, heapBytesPerLease, rssBytesPerLease,
 *     buildMs, selectMicros }
 */
import { pathToFileURL } from 'node:url';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { granted, newTask } from '../core/lifecycle.js';
import { entryOf, TaskIndex, type OwnerEntry, type PendingTask, type TaskEntry } from '../core/task-index.js';
import { decodeTask } from '../core/task-record.js';
import { digestCanonical, payloadDigest } from '../payload-digest.js';

export interface IndexMemoryOptions {
  readonly tasks: number;
  readonly leases: number;
  /** Named queues the tasks are spread over (1: all in `default`). */
  readonly queues?: number;
}

export interface IndexMemoryReport {
  readonly tasks: number;
  readonly leases: number;
  readonly heapBytesPerTask: number;
  readonly rssBytesPerTask: number;
  readonly heapBytesPerLease: number;
  readonly rssBytesPerLease: number;
  /** Parsing the stored records as the snapshot does (`decodeTask` + `entryOf`), all of them. */
  readonly decodeMs: number;
  /** Building the index from the snapshot's entries (sorting included). */
  readonly buildMs: number;
  /** One `select()` at N pending tasks (the acquire path), averaged over 10,000. */
  readonly selectMicros: number;
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i += 1) collect();
}

function memory(): { heap: number; rss: number } {
  gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, rss: m.rss };
}

const NOW = 1_800_000_000_000;
const PAGE = 500;

/** The stored JSON of task `i` as a submit writes it (what the snapshot reads back). */
function storedValue(i: number, digest: string, queues: number): string {
  const id = String(i).padStart(7, '0');
  const queue = queues > 1 ? `q${i % queues}` : undefined;
  return JSON.stringify(
    newTask(
      { taskId: `task-${id}`, resource: `account/${id}`, queue, payloadBytes: 64, payloadDigest: digest },
      { nowMs: NOW, defaults: DEFAULT_RETRY_POLICY },
    ),
  );
}

export function measureIndexMemory(options: IndexMemoryOptions): IndexMemoryReport {
  const digest = payloadDigest({ pad: 'x'.repeat(50) });
  const before = memory();
  const index = new TaskIndex({ wallClock: () => NOW, defaults: DEFAULT_RETRY_POLICY });
  let entries: TaskEntry[] = [];
  let revision = 100n;
  let decodeMs = 0;
  // The snapshot: pages of stored values, each parsed and turned into its lean entry.
  for (let start = 0; start < options.tasks; start += PAGE) {
    const end = Math.min(options.tasks, start + PAGE);
    const values: string[] = [];
    for (let i = start; i < end; i += 1) values.push(storedValue(i, digest, options.queues ?? 1));
    const decodeStarted = performance.now();
    for (const value of values) {
      const decoded = decodeTask(value, digestCanonical);
      if (decoded === undefined) throw new Error('undecodable record');
      revision += 1n;
      entries.push(
        entryOf(
          { record: decoded.record, value, createRevision: revision, modRevision: revision },
          DEFAULT_RETRY_POLICY,
        ),
      );
    }
    decodeMs += performance.now() - decodeStarted;
  }
  const started = performance.now();
  index.reset(entries, [], revision);
  const buildMs = performance.now() - started;
  entries = [];
  const withTasks = memory();

  // Acquires at N pending: the select the grant path runs.
  const selectStarted = performance.now();
  const selecting = (options.queues ?? 1) > 1 ? { queues: ['q0'] } : {};
  for (let i = 0; i < 10_000; i += 1) index.select(selecting);
  const selectMicros = ((performance.now() - selectStarted) * 1_000) / 10_000;

  // Leases: a grant rewrites the task (its attempt open) and creates an owner key; the session
  // keeps the grant (resource -> token and request id).
  const sessionGrants = new Map<string, { readonly token: bigint; readonly requestId: string }>();
  for (let i = 0; i < options.leases; i += 1) {
    const picked: PendingTask | undefined = index.pendingTask(`task-${String(i).padStart(7, '0')}`);
    if (picked === undefined) break;
    revision += 1n;
    const record = granted(
      JSON.parse(picked.raw) as never,
      { workerId: `worker-${i % 1000}`, sessionId: 'a1b2c3d4e5f6' },
      NOW,
    );
    const value = JSON.stringify(record);
    const owner: OwnerEntry = {
      resource: picked.resource,
      taskId: picked.taskId,
      sessionId: (i % 1000).toString(16).padStart(12, '0'),
      requestId: `req-${i}`,
      token: revision,
    };
    index.applyOwner(picked.resource, owner);
    index.applyTask(
      picked.taskId,
      entryOf({ record, value, createRevision: picked.createRevision, modRevision: revision }, DEFAULT_RETRY_POLICY),
    );
    sessionGrants.set(picked.resource, { token: revision, requestId: owner.requestId });
  }
  const withLeases = memory();
  const report: IndexMemoryReport = {
    tasks: options.tasks,
    leases: options.leases,
    heapBytesPerTask: Math.round((withTasks.heap - before.heap) / Math.max(1, options.tasks)),
    rssBytesPerTask: Math.round((withTasks.rss - before.rss) / Math.max(1, options.tasks)),
    heapBytesPerLease: Math.round((withLeases.heap - withTasks.heap) / Math.max(1, options.leases)),
    rssBytesPerLease: Math.round((withLeases.rss - withTasks.rss) / Math.max(1, options.leases)),
    decodeMs: Math.round(decodeMs),
    buildMs: Math.round(buildMs),
    selectMicros: Math.round(selectMicros * 100) / 100,
  };
  // Keep both alive until measured.
  if (index.stats().pending + sessionGrants.size < 0) throw new Error('unreachable');
  return report;
}

function argInt(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  const text = at < 0 ? undefined : process.argv[at + 1];
  return text === undefined ? fallback : Number(text);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const report = measureIndexMemory({
    tasks: argInt('tasks', 100_000),
    leases: argInt('leases', 10_000),
    queues: argInt('queues', 1),
  });
  process.stdout.write(`${JSON.stringify(report)}\n`);
}
