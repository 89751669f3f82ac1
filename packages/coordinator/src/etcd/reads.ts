/**
 * Read-only access to the key layout, with values parsed and revisions as bigint. Every read here
 * is idempotent and retried by {@link Kv.read}. Tokens are read from create_revision, never from
 * a value. The parse functions are the one place stored bytes become records.
 */
import {
  decodeRecord,
  HoldingRecordSchema,
  OwnerRecordSchema,
  SessionRecordSchema,
  TaskRecordSchema,
} from '../core/records.js';
import type { HeldOwner, StoredHolding, StoredOwner, StoredSession, StoredTask } from '../store/port.js';
import type { KeyValue } from './backend.js';
import type { KeyLayout } from './keys.js';
import { firstKv, op, rangeKvs, type Kv } from './kv.js';

export function parseTask(kv: KeyValue | undefined): StoredTask | undefined {
  if (kv === undefined) return undefined;
  const record = decodeRecord(TaskRecordSchema, kv.value);
  if (record === undefined) return undefined;
  return { record, createRevision: kv.createRevision, modRevision: kv.modRevision };
}

export function parseOwner(keys: KeyLayout, kv: KeyValue | undefined): StoredOwner | undefined {
  if (kv === undefined) return undefined;
  const parsed = keys.parse(kv.key);
  const record = decodeRecord(OwnerRecordSchema, kv.value);
  if (parsed?.family !== 'owner' || record === undefined) return undefined;
  return {
    resource: parsed.resource,
    record,
    token: kv.createRevision,
    modRevision: kv.modRevision,
    leaseId: kv.lease,
  };
}

export function parseSession(keys: KeyLayout, kv: KeyValue | undefined): StoredSession | undefined {
  if (kv === undefined) return undefined;
  const parsed = keys.parse(kv.key);
  const record = decodeRecord(SessionRecordSchema, kv.value);
  if (parsed?.family !== 'session' || record === undefined) return undefined;
  return { sessionId: parsed.sessionId, record, modRevision: kv.modRevision, leaseId: kv.lease };
}

export function parseHolding(kv: KeyValue | undefined): StoredHolding | undefined {
  if (kv === undefined) return undefined;
  const record = decodeRecord(HoldingRecordSchema, kv.value);
  return record === undefined ? undefined : { record, token: kv.createRevision };
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

  /** The session key and the owner keys it holds (from holdings/), at one revision. */
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

  /** Up to `limit` tasks with ids after `after`, in key order. */
  async taskPage(after: string | undefined, limit: number): Promise<{ tasks: StoredTask[]; more: boolean }> {
    const page = await this.#kv.rangePage(this.#keys.tasks, {
      limit,
      ...(after === undefined ? {} : { fromKey: `${this.#keys.task(after)}\0` }),
    });
    return {
      tasks: page.kvs.map(parseTask).filter((t): t is StoredTask => t !== undefined),
      more: page.more,
    };
  }

  /** Every session key at `atRevision` (default: now), e.g. to pair with a snapshot. */
  async sessions(atRevision?: bigint): Promise<StoredSession[]> {
    const res = await this.#kv.rangeAll(this.#keys.sessions, atRevision === undefined ? {} : { atRevision });
    return res.kvs.map((kv) => parseSession(this.#keys, kv)).filter((s): s is StoredSession => s !== undefined);
  }

  /** Every task and owner at one revision: the snapshot the task index is rebuilt from. */
  async snapshot(): Promise<{ tasks: StoredTask[]; owners: StoredOwner[]; revision: bigint }> {
    const tasks = await this.#kv.rangeAll(this.#keys.tasks);
    const owners = await this.#kv.rangeAll(this.#keys.owners, { atRevision: tasks.revision });
    return {
      tasks: tasks.kvs.map(parseTask).filter((t): t is StoredTask => t !== undefined),
      owners: owners.kvs.map((kv) => parseOwner(this.#keys, kv)).filter((o): o is StoredOwner => o !== undefined),
      revision: tasks.revision,
    };
  }
}
