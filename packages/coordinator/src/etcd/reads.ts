/**
 * Read-only access to the key layout, with values parsed and revisions as bigint. Every read here
 * is idempotent and retried by {@link Kv.read}, and every range is paged by bytes
 * ({@link Kv.rangePages}). Tokens are read from create_revision, never from a value. The parse
 * functions are the one place stored bytes become records.
 */
import {
  AttemptRecordSchema,
  decodeRecord,
  HoldingRecordSchema,
  OwnerRecordSchema,
  SessionRecordSchema,
  type AttemptRecord,
} from '../core/records.js';
import { decodeTask, MAX_TASK_RECORD_BYTES } from '../core/task-record.js';
import { digestCanonical } from '../payload-digest.js';
import type { HeldOwner, StoredHolding, StoredOwner, StoredSession, StoredTask, TaskDetail } from '../store/port.js';
import type { JsonValue } from '@leasehold/protocol';
import type { z } from 'zod';
import { EtcdError } from '../errors.js';
import type { KeyValue } from './backend.js';
import type { KeyLayout, ParsedKey } from './keys.js';
import { firstKv, op, rangeKvs, type Kv } from './kv.js';

/** Largest owner, session or holding value (ids are at most 200 ASCII characters). */
export const MAX_SMALL_RECORD_BYTES = 2 * 1024;

export function parseTask(kv: KeyValue | undefined): StoredTask | undefined {
  if (kv === undefined) return undefined;
  const decoded = decodeTask(kv.value, digestCanonical);
  if (decoded === undefined) return undefined;
  return {
    record: decoded.record,
    value: kv.value,
    ...(decoded.legacy === undefined ? {} : { legacy: decoded.legacy }),
    createRevision: kv.createRevision,
    modRevision: kv.modRevision,
  };
}

/** The key of `kv` when it is of `family`, with its value decoded by `schema`; else undefined. */
function decodeKeyed<F extends ParsedKey['family'], T>(
  keys: KeyLayout,
  kv: KeyValue | undefined,
  family: F,
  schema: z.ZodType<T>,
): { readonly key: Extract<ParsedKey, { family: F }>; readonly record: T; readonly kv: KeyValue } | undefined {
  if (kv === undefined) return undefined;
  const parsed = keys.parse(kv.key);
  const record = decodeRecord(schema, kv.value);
  if (parsed?.family !== family || record === undefined) return undefined;
  return { key: parsed as Extract<ParsedKey, { family: F }>, record, kv };
}

export function parseOwner(keys: KeyLayout, kv: KeyValue | undefined): StoredOwner | undefined {
  const owner = decodeKeyed(keys, kv, 'owner', OwnerRecordSchema);
  if (owner === undefined) return undefined;
  return {
    resource: owner.key.resource,
    record: owner.record,
    token: owner.kv.createRevision,
    modRevision: owner.kv.modRevision,
    leaseId: owner.kv.lease,
  };
}

export function parseSession(keys: KeyLayout, kv: KeyValue | undefined): StoredSession | undefined {
  const session = decodeKeyed(keys, kv, 'session', SessionRecordSchema);
  if (session === undefined) return undefined;
  const { key, record } = session;
  return { sessionId: key.sessionId, record, modRevision: session.kv.modRevision, leaseId: session.kv.lease };
}

export function parseHolding(kv: KeyValue | undefined): StoredHolding | undefined {
  if (kv === undefined) return undefined;
  const record = decodeRecord(HoldingRecordSchema, kv.value);
  return record === undefined ? undefined : { record, token: kv.createRevision };
}

/** A payload as stored in `inputs/<t>` (its JSON); undefined when the key is missing or not JSON. */
export function parsePayload(kv: KeyValue | undefined): JsonValue | undefined {
  if (kv === undefined) return undefined;
  try {
    return JSON.parse(kv.value) as JsonValue;
  } catch {
    return undefined;
  }
}

export class EtcdReads {
  readonly #kv: Kv;
  readonly #keys: KeyLayout;

  constructor(kv: Kv, keys: KeyLayout) {
    this.#kv = kv;
    this.#keys = keys;
  }

  async session(sessionId: string): Promise<StoredSession | undefined> {
    const res = await this.#kv.read('session', [op.get(this.#keys.session(sessionId))]);
    return parseSession(this.#keys, firstKv(res, 0));
  }

  /**
   * The session key and the owner keys it holds (from holdings/), at one revision. A session holds
   * at most its capacity of grants (the hello's, bounded), so the reply is bounded too.
   */
  async sessionHoldings(sessionId: string): Promise<{ session: StoredSession | undefined; held: HeldOwner[] }> {
    const res = await this.#kv.read('sessionHoldings', [
      op.get(this.#keys.session(sessionId)),
      op.getPrefix(this.#keys.holdingsOf(sessionId)),
    ]);
    const held: HeldOwner[] = [];
    for (const kv of rangeKvs(res, 1)) {
      const holding = parseHolding(kv);
      if (holding !== undefined) held.push({ resource: holding.record.resource, token: holding.token });
    }
    return { session: parseSession(this.#keys, firstKv(res, 0)), held };
  }

  /** The live grant made for `requestId` of the session, if any. */
  async holding(sessionId: string, requestId: string): Promise<StoredHolding | undefined> {
    const res = await this.#kv.read('holding', [op.get(this.#keys.holding(sessionId, requestId))]);
    return parseHolding(firstKv(res, 0));
  }

  async task(taskId: string): Promise<StoredTask | undefined> {
    const res = await this.#kv.read('task', [op.get(this.#keys.task(taskId))]);
    return parseTask(firstKv(res, 0));
  }

  /**
   * Tasks by id (absent ones left out), at one revision per reply. Records of layout v1 may be up
   * to 1.5 MiB each: a reply over the receive limit is read again in two halves.
   */
  async tasksByIds(ids: readonly string[]): Promise<StoredTask[]> {
    if (ids.length === 0) return [];
    try {
      const res = await this.#kv.read(
        'tasks',
        ids.map((id) => op.get(this.#keys.task(id))),
      );
      return ids.map((_, i) => parseTask(firstKv(res, i))).filter((t): t is StoredTask => t !== undefined);
    } catch (err) {
      if (!(err instanceof EtcdError && err.failure === 'response-too-large' && ids.length > 1)) throw err;
      const half = Math.ceil(ids.length / 2);
      return [...(await this.tasksByIds(ids.slice(0, half))), ...(await this.tasksByIds(ids.slice(half)))];
    }
  }

  /**
   * A task with its payload and history, at one revision (a task view): the record, `inputs/<t>`
   * and `history/<t>#*` (at most MAX_TASK_HISTORY entries, each bounded). A
   * record of layout v1 carries both inside.
   */
  async taskDetail(taskId: string): Promise<TaskDetail | undefined> {
    const res = await this.#kv.read('taskDetail', [
      op.get(this.#keys.task(taskId)),
      op.get(this.#keys.input(taskId)),
      op.getPrefix(this.#keys.historyOf(taskId)),
    ]);
    const task = parseTask(firstKv(res, 0));
    if (task === undefined) return undefined;
    if (task.legacy !== undefined) return { task, payload: task.legacy.payload, history: [...task.legacy.history] };
    const history: AttemptRecord[] = [];
    for (const kv of rangeKvs(res, 2)) {
      const entry = decodeRecord(AttemptRecordSchema, kv.value);
      if (entry !== undefined) history.push(entry);
    }
    return { task, payload: parsePayload(firstKv(res, 1)), history };
  }

  async owner(resource: string): Promise<StoredOwner | undefined> {
    const res = await this.#kv.read('owner', [op.get(this.#keys.owner(resource))]);
    return parseOwner(this.#keys, firstKv(res, 0));
  }

  /** Owner of `resource` and task `taskId`, at one revision. */
  async ownerAndTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined }> {
    const res = await this.#kv.read('ownerAndTask', [
      op.get(this.#keys.owner(resource)),
      op.get(this.#keys.task(taskId)),
    ]);
    return { owner: parseOwner(this.#keys, firstKv(res, 0)), task: parseTask(firstKv(res, 1)) };
  }

  /** Owner of `resource`, task `taskId` and its payload's JSON, at one revision (a replayed grant). */
  async grantedTask(
    resource: string,
    taskId: string,
  ): Promise<{ owner: StoredOwner | undefined; task: StoredTask | undefined; payloadJson: string | undefined }> {
    const res = await this.#kv.read('grantedTask', [
      op.get(this.#keys.owner(resource)),
      op.get(this.#keys.task(taskId)),
      op.get(this.#keys.input(taskId)),
    ]);
    const task = parseTask(firstKv(res, 1));
    return {
      owner: parseOwner(this.#keys, firstKv(res, 0)),
      task,
      payloadJson: task?.legacy?.payloadJson ?? firstKv(res, 2)?.value,
    };
  }

  /** Up to `limit` tasks with ids after `after`, in key order, in byte-bounded pages. */
  async taskPage(after: string | undefined, limit: number): Promise<{ tasks: StoredTask[]; more: boolean }> {
    const tasks: StoredTask[] = [];
    let more = false;
    const pages = this.#kv.rangePages(this.#keys.tasks, {
      valueBytes: MAX_TASK_RECORD_BYTES,
      ...(after === undefined ? {} : { fromKey: `${this.#keys.task(after)}\0` }),
    });
    for await (const page of pages) {
      for (const kv of page.kvs) {
        if (tasks.length >= limit) {
          more = true;
          break;
        }
        const task = parseTask(kv);
        if (task !== undefined) tasks.push(task);
      }
      if (tasks.length >= limit) {
        more ||= page.more;
        break;
      }
    }
    return { tasks, more };
  }

  /** Every session key at `atRevision` (default: now), e.g. to pair with a snapshot. */
  async sessions(atRevision?: bigint): Promise<StoredSession[]> {
    const res = await this.#kv.rangeAll(this.#keys.sessions, {
      valueBytes: MAX_SMALL_RECORD_BYTES,
      ...(atRevision === undefined ? {} : { atRevision }),
    });
    return res.kvs.map((kv) => parseSession(this.#keys, kv)).filter((s): s is StoredSession => s !== undefined);
  }

  /**
   * Every task and owner at one revision: the snapshot an index is rebuilt from. Tasks go to
   * `onTasks` page by page as read (a million of them never sit in one array); owners are returned.
   */
  async snapshot(
    onTasks: (tasks: readonly StoredTask[]) => void,
  ): Promise<{ owners: StoredOwner[]; revision: bigint }> {
    let revision: bigint | undefined;
    for await (const page of this.#kv.rangePages(this.#keys.tasks, { valueBytes: MAX_TASK_RECORD_BYTES })) {
      revision = page.revision;
      onTasks(page.kvs.map(parseTask).filter((t): t is StoredTask => t !== undefined));
    }
    const owners = await this.#kv.rangeAll(this.#keys.owners, {
      valueBytes: MAX_SMALL_RECORD_BYTES,
      ...(revision === undefined ? {} : { atRevision: revision }),
    });
    return {
      owners: owners.kvs.map((kv) => parseOwner(this.#keys, kv)).filter((o): o is StoredOwner => o !== undefined),
      revision: revision ?? owners.revision,
    };
  }
}
