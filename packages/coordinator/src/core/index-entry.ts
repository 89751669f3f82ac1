/**
 * The index's entries, pure: what one pending task and one ended task cost in memory, and how a
 * stored task becomes one ({@link entryOf}). See task-index.ts for how they are kept.
 */
import { MAX_PRIORITY, type KeepFor, type RetryPolicy } from '@leasehold/protocol';
import { policyOf } from './lifecycle.js';
import { encodeTask, queueOf, type TaskRecord } from './task-record.js';

/** A pending task as the index keeps it. */
export interface PendingTask {
  readonly state: 'pending';
  readonly taskId: string;
  readonly resource: string;
  /** Its queue (`default` for records without one); one shared string per queue in an index. */
  readonly queue: string;
  /** create_revision of the task key: selection is FIFO by it. */
  readonly createRevision: bigint;
  /** mod_revision of the task key as last seen. */
  readonly modRevision: bigint;
  /**
   * The stored record's JSON at `modRevision` (layout v2). A grant computes its write from it
   * without re-reading etcd ({@link recordOf}): the grant txn compares the task key's mod_revision
   * with `modRevision`, so a stale string only fails it.
   */
  readonly raw: string;
  readonly priority: number;
  /** `notBeforeMs`, 0 when none. */
  readonly dueMs: number;
  /** An attempt is open (the grant's record): parked until the record that closes it. */
  readonly open: boolean;
  /** No attempt left and none open (a record of an older coordinator): parked, settled as failed. */
  readonly exhausted: boolean;
  /** A record of layout v1: parked (never granted from the index) until it is converted. */
  readonly legacy: boolean;
  /** Bytes of the payload (a grant batch is bounded by them). */
  readonly payloadBytes: number;
}

/** An ended task as the index keeps it: what retention decides on, and the task counts. */
export interface EndedTask {
  readonly state: 'completed' | 'failed' | 'cancelled';
  readonly taskId: string;
  /** Its queue (the per-queue counts); one shared string per queue in an index. */
  queue: string;
  readonly modRevision: bigint;
  /** When it ended (epoch ms; `atMs` for records without `endedAtMs`). */
  readonly endedAtMs: number;
  readonly payloadBytes: number;
  /** The task's own retention for the state it ended in (undefined: the installation's). */
  readonly keep: KeepFor | undefined;
}

export type TaskEntry = PendingTask | EndedTask;

/** What the index needs of a stored task (a StoredTask of the store port). */
export interface IndexInput {
  readonly record: TaskRecord;
  /** The stored value (layout v2); a v1 record's is not kept (see `legacy`). */
  readonly value: string;
  readonly legacy?: unknown;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
}

const OPEN = 1;
const EXHAUSTED = 2;
const LEGACY = 4;

export type Status = 'ready' | 'delayed' | 'parked';

/**
 * A pending task's entry: one object of fixed shape per task (its flags packed in one small
 * integer, `state` on the prototype), whose last three fields are the index's own bookkeeping.
 * Made by {@link entryOf}; owned by the index it is given to.
 */
export class PendingEntry implements PendingTask {
  readonly taskId: string;
  readonly resource: string;
  /** Set to the index's shared copy of the name when the entry is added. */
  queue: string;
  readonly createRevision: bigint;
  readonly modRevision: bigint;
  readonly raw: string;
  readonly priority: number;
  readonly dueMs: number;
  readonly payloadBytes: number;
  readonly #flags: number;
  /** Arrival sequence: breaks create_revision ties (one txn, many tasks). */
  seq = 0;
  status: Status = 'parked';
  /** Generation of its delayed-heap entry (0: none). */
  dueGen = 0;

  constructor(task: IndexInput, fields: { readonly raw: string; readonly priority: number; readonly flags: number }) {
    this.taskId = task.record.taskId;
    this.resource = task.record.resource;
    this.queue = queueOf(task.record);
    this.createRevision = task.createRevision;
    this.modRevision = task.modRevision;
    this.raw = fields.raw;
    this.priority = fields.priority;
    this.dueMs = task.record.notBeforeMs ?? 0;
    this.payloadBytes = task.record.payloadBytes;
    this.#flags = fields.flags;
  }

  get state(): 'pending' {
    return 'pending';
  }

  get open(): boolean {
    return (this.#flags & OPEN) !== 0;
  }

  get exhausted(): boolean {
    return (this.#flags & EXHAUSTED) !== 0;
  }

  get legacy(): boolean {
    return (this.#flags & LEGACY) !== 0;
  }
}

/** The index entry of a stored task. */
export function entryOf(task: IndexInput, defaults: RetryPolicy): TaskEntry {
  const r = task.record;
  if (r.state !== 'pending') {
    return {
      state: r.state,
      taskId: r.taskId,
      queue: queueOf(r),
      modRevision: task.modRevision,
      endedAtMs: r.endedAtMs ?? r.atMs ?? 0,
      payloadBytes: r.payloadBytes,
      keep: r.retention?.[r.state],
    };
  }
  const legacy = task.legacy !== undefined;
  const exhausted = r.open === undefined && r.attempts >= policyOf(r, defaults).maxAttempts;
  return new PendingEntry(task, {
    raw: legacy ? encodeTask(r) : task.value,
    priority: Math.min(MAX_PRIORITY, Math.max(0, r.priority ?? 0)),
    flags: (r.open === undefined ? 0 : OPEN) | (exhausted ? EXHAUSTED : 0) | (legacy ? LEGACY : 0),
  });
}

/**
 * The task record a pending entry holds. Its JSON was validated when the entry was made (the
 * watch or the snapshot parsed it), so it is not validated again here.
 */
export function recordOf(task: PendingTask): TaskRecord {
  return JSON.parse(task.raw) as TaskRecord;
}

/** The submit span's trace context in a pending entry's record, without parsing all of it. */
export function traceparentOf(task: PendingTask): string | undefined {
  return /"traceparent":"([0-9a-f-]{55})"/.exec(task.raw)?.[1];
}
