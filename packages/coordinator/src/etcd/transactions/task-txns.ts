/**
 * Task transactions: submit (idempotent by task id), cancel, retry and purge of the HTTP API, the
 * settlement of an attempt whose lease ended without the holder saying how, and the conversion of
 * records of layout v1. Every write of a task record goes through `recordWriteOps` (history entry
 * of an ended attempt; a v1 record's payload and history moved out in passing).
 */
import type {
  CancelArgs,
  CancelOutcome,
  MigrateItem,
  NewTask,
  RewriteOutcome,
  SettleArgs,
  SubmitBatchOutcome,
  TaskRef,
  TaskWrite,
} from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import type { TxnSpec } from '../backend.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { parseTask } from '../reads.js';
import { encodeChecked, endedOf, recordWriteOps } from '../record-ops.js';

/**
 * cancelTask
 * keys:     tasks/<t>, owners/<r>, holdings/<sid>/<q>, history/<t>#<n>, inputs/<t> (a v1 record)
 * compares: tasks/<t> mod_revision == read (a grant rewrites the task, so a grant in between
 *           fails this); if the task is leased: owners/<r> create_revision == the holder's token
 * success:  put tasks/<t> = the cancelled record (and, when the cancel closes an open attempt, its
 *           history entry; a v1 record's payload and history moved out); if leased: delete
 *           owners/<r>, holdings/<sid>/<q> (the serving coordinator sees the delete in its watch
 *           and pushes lease.revoked; the caller then advances the sink's fence to the cancel
 *           revision, so the holder's late write is refused)
 * failure:  nothing
 * result:   cancelled{revision}, or raced (read again and retry)
 */
export async function cancelTask(kv: Kv, keys: KeyLayout, args: CancelArgs): Promise<CancelOutcome> {
  const taskKey = keys.task(args.task.taskId);
  const ownerKey = keys.owner(args.task.resource);
  const res = await kv.txn('cancelTask', {
    compare: [
      cmp.modifiedAt(taskKey, args.taskModRevision),
      ...(args.owner === undefined ? [] : [cmp.createdAt(ownerKey, args.owner.token)]),
    ],
    success: [
      ...recordWriteOps(keys, args, endedOf(args.task)),
      ...(args.owner === undefined
        ? []
        : [op.del(ownerKey), op.del(keys.holding(args.owner.sessionId, args.owner.requestId))]),
    ],
  });
  return res.succeeded ? { kind: 'cancelled', revision: res.revision } : { kind: 'raced' };
}

/** submitTasks takes at most this many tasks (one compare, two puts and one get each; etcd's limit is 128). */
export const MAX_SUBMITS_PER_TXN = 64;
/** ... and at most this many bytes of records and payloads (etcd refuses requests over 1.5 MiB by default). */
export const MAX_SUBMIT_BYTES_PER_TXN = 1_200_000;

/**
 * submitTasks — create one or many tasks with distinct ids in one txn.
 * keys:     tasks/<t>, inputs/<t> of every task
 * compares: every tasks/<t> absent
 * success:  put every tasks/<t> = TaskRecord (state pending, attempts 0, payloadBytes and
 *           payloadDigest of its payload, `queue` unless it is `default` — every later write of
 *           the task keeps it; a record without one is `default`'s), put every inputs/<t> = the
 *           payload's JSON
 * failure:  get every tasks/<t> (in order; records only, never payloads: a repeat is judged by the
 *           stored payloadDigest)
 * result:   created{revision} (all at one revision), or exists{per task: the stored task,
 *           'unreadable', or undefined when absent} — nothing was created; the caller settles the
 *           existing ones (same definition: 200; another: 409) and submits the absent ones again
 */
export async function submitTasks(kv: Kv, keys: KeyLayout, tasks: readonly NewTask[]): Promise<SubmitBatchOutcome> {
  if (tasks.length === 0 || tasks.length > MAX_SUBMITS_PER_TXN) {
    throw new RangeError(`submitTasks takes 1 to ${MAX_SUBMITS_PER_TXN} tasks`);
  }
  const ids = tasks.map((t) => t.record.taskId);
  if (new Set(ids).size !== tasks.length) throw new RangeError('submitTasks takes distinct ids');
  const res = await kv.txn(tasks.length === 1 ? 'submitTask' : 'submitTasks', {
    compare: ids.map((id) => cmp.absent(keys.task(id))),
    success: tasks.flatMap((t) => [
      op.put(keys.task(t.record.taskId), encodeChecked(t.record)),
      op.put(keys.input(t.record.taskId), t.payloadJson),
    ]),
    failure: ids.map((id) => op.get(keys.task(id))),
  });
  if (res.succeeded) return { kind: 'created', revision: res.revision };
  return {
    kind: 'exists',
    existing: tasks.map((_, i) => {
      const kv = firstKv(res, i);
      return kv === undefined ? undefined : (parseTask(kv) ?? 'unreadable');
    }),
  };
}

/**
 * settleLostAttempt — the lease of an open attempt ended without the holder ending the attempt
 * (its session expired or was revoked, its coordinator died): record it, with the backoff, or fail
 * the task when no attempt is left. Any coordinator may run it; the compares let only one land.
 * keys:     tasks/<t>, owners/<r>, history/<t>#<n>, inputs/<t> (a v1 record)
 * compares: tasks/<t> mod_revision == T (still the record the grant of token T wrote: the attempt
 *           is open and nothing else closed it); owners/<r> create_revision != T (that grant's
 *           owner key is gone — absent, or another grant's)
 * success:  put tasks/<t> = the settled record, its history entry (a v1 record's payload and
 *           history moved out)
 * failure:  nothing
 * result:   rewritten{revision}, or raced (someone else settled or changed it, or it is still held)
 */
export async function settleLostAttempt(kv: Kv, keys: KeyLayout, args: SettleArgs): Promise<RewriteOutcome> {
  const taskKey = keys.task(args.next.taskId);
  const res = await kv.txn('settleLostAttempt', {
    compare: [cmp.modifiedAt(taskKey, args.token), cmp.notCreatedAt(keys.owner(args.next.resource), args.token)],
    success: recordWriteOps(keys, args, endedOf(args.prev)),
  });
  return res.succeeded ? { kind: 'rewritten', revision: res.revision } : { kind: 'raced' };
}

/**
 * retryTask — a failed task is pending again with a fresh attempt budget.
 * keys:     tasks/<t>, inputs/<t> and history/<t>#<n> (a v1 record)
 * compares: tasks/<t> mod_revision == read (still the failed record the caller saw)
 * success:  put tasks/<t> = the retried record (a v1 record's payload and history moved out)
 * failure:  nothing
 * result:   rewritten{revision}, or raced (read again)
 */
export async function retryTask(
  kv: Kv,
  keys: KeyLayout,
  args: TaskWrite & { readonly modRevision: bigint },
): Promise<RewriteOutcome> {
  const taskKey = keys.task(args.next.taskId);
  const res = await kv.txn('retryTask', {
    compare: [cmp.modifiedAt(taskKey, args.modRevision)],
    success: recordWriteOps(keys, args, endedOf(args.next)),
  });
  return res.succeeded ? { kind: 'rewritten', revision: res.revision } : { kind: 'raced' };
}

/**
 * purgeTasks takes at most this many tasks: with several, one nested txn each (one compare, three
 * deletes) under a txn of one op per task, within etcd's 128 ops.
 */
export const MAX_PURGES_PER_TXN = 42;

/**
 * purgeTasks — delete ended tasks the caller read (and judged old enough): `POST /v1/tasks/purge`
 * and the retention sweeps.
 * keys:     tasks/<t>, inputs/<t>, history/<t>#* of every task
 * compares: per task: tasks/<t> mod_revision == read (unchanged: still terminal, not retried since)
 * success:  per task: delete tasks/<t>, inputs/<t> and history/<t>#*
 * failure:  nothing
 * shape:    one task: that txn. Several: a txn without compares whose success ops are one nested
 *           txn per task, judged on the store before the txn (see grantOwners): a task that changed
 *           since read is left, and fails no other.
 * result:   per task, true when deleted
 */
export async function purgeTasks(kv: Kv, keys: KeyLayout, tasks: readonly TaskRef[]): Promise<readonly boolean[]> {
  if (tasks.length === 0 || tasks.length > MAX_PURGES_PER_TXN) {
    throw new RangeError(`purgeTasks takes 1 to ${MAX_PURGES_PER_TXN} tasks`);
  }
  const spec = (t: TaskRef): TxnSpec => ({
    compare: [cmp.modifiedAt(keys.task(t.taskId), t.modRevision)],
    success: [op.del(keys.task(t.taskId)), op.del(keys.input(t.taskId)), op.delPrefix(keys.historyOf(t.taskId))],
  });
  return kv.txnEach({ one: 'purgeTask', many: 'purgeTasks' }, tasks, spec, (_, res) => res.succeeded);
}

/** migrateTasks takes at most this many bytes of payloads and histories per txn. */
export const MAX_MIGRATE_BYTES_PER_TXN = 1_000_000;

/**
 * migrateTasks — convert records of layout v1 (payload and history inside `tasks/<t>`) to layout
 * v2, for tasks without an open attempt (an open one is converted by the txn that closes it). Any
 * coordinator may run it at any time; the compare makes a second conversion of a record a no-op.
 * keys:     tasks/<t>, inputs/<t>, history/<t>#1..k of every task
 * compares: every tasks/<t> mod_revision == read (still the v1 record read)
 * success:  per task: put tasks/<t> = the v2 record, put inputs/<t> = its payload, put
 *           history/<t>#i = its i-th ended attempt
 * failure:  nothing
 * result:   true when all were converted (else the caller converts one per txn)
 */
export async function migrateTasks(kv: Kv, keys: KeyLayout, items: readonly MigrateItem[]): Promise<boolean> {
  if (items.length === 0) throw new RangeError('migrateTasks takes at least one task');
  const res = await kv.txn(items.length === 1 ? 'migrateTask' : 'migrateTasks', {
    compare: items.map((t) => cmp.modifiedAt(keys.task(t.record.taskId), t.modRevision)),
    success: items.flatMap((t) => recordWriteOps(keys, { next: t.record, legacy: t.legacy }, endedOf(t.record))),
  });
  return res.succeeded;
}

/** Ops of one {@link migrateTasks} item (callers size batches by them). */
export function migrateOpsOf(item: MigrateItem): number {
  return 2 + item.legacy.history.length;
}
