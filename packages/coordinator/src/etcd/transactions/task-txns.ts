/** Task transactions of the HTTP API: submit (idempotent by task id) and cancel. */
import type { IKeyValue } from 'etcd3';
import { encodeRecord, type TaskRecord } from '../../core/records.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';

export type SubmitResult =
  | { readonly created: true; readonly revision: bigint }
  | { readonly created: false; readonly existing: IKeyValue | undefined };

/**
 * submitTask
 * keys:     tasks/<t>
 * compares: tasks/<t> absent
 * success:  put tasks/<t> = TaskRecord (state pending, attempts 0)
 * failure:  get tasks/<t> (the caller compares definitions: same -> 200, different -> 409)
 * result:   { created, revision } or the existing key
 */
export async function submitTask(kv: Kv, keys: KeyLayout, task: TaskRecord): Promise<SubmitResult> {
  const key = keys.task(task.taskId);
  const res = await kv.txn('submitTask', {
    compare: [cmp.absent(key)],
    success: [op.put(key, encodeRecord(task))],
    failure: [op.get(key)],
  });
  return res.succeeded ? { created: true, revision: res.revision } : { created: false, existing: firstKv(res, 0) };
}

export interface CurrentOwner {
  readonly sessionId: string;
  readonly token: bigint;
  readonly requestId: string;
}

/**
 * cancelTask
 * keys:     tasks/<t>, owners/<r>, holdings/<sid>/<q>
 * compares: tasks/<t> mod_revision == read (a grant rewrites the task, so a grant in between
 *           fails this); if the task is leased: owners/<r> create_revision == the holder's token
 * success:  put tasks/<t> state=cancelled; if leased: delete owners/<r>, holdings/<sid>/<q>
 *           (the serving coordinator sees the delete in its watch and pushes lease.revoked)
 * failure:  get tasks/<t> (the caller reads again and retries)
 * result:   { ok, revision }
 */
export async function cancelTask(
  kv: Kv,
  keys: KeyLayout,
  args: {
    readonly task: TaskRecord;
    readonly taskModRevision: bigint;
    /** The holder when the task is leased. */
    readonly owner: CurrentOwner | undefined;
  },
): Promise<{ readonly ok: boolean; readonly revision: bigint }> {
  const taskKey = keys.task(args.task.taskId);
  const ownerKey = keys.owner(args.task.resource);
  const cancelled: TaskRecord = { ...args.task, state: 'cancelled' };
  const res = await kv.txn('cancelTask', {
    compare: [
      cmp.modifiedAt(taskKey, args.taskModRevision),
      ...(args.owner === undefined ? [] : [cmp.createdAt(ownerKey, args.owner.token)]),
    ],
    success: [
      op.put(taskKey, encodeRecord(cancelled)),
      ...(args.owner === undefined
        ? []
        : [op.del(ownerKey), op.del(keys.holding(args.owner.sessionId, args.owner.requestId))]),
    ],
    failure: [op.get(taskKey)],
  });
  return { ok: res.succeeded, revision: res.revision };
}

/** submitTasks takes at most this many tasks (one compare, one put and one get each; etcd's limit is 128). */
export const MAX_SUBMITS_PER_TXN = 128;
/** ... and at most this many bytes of records (etcd refuses requests over 1.5 MiB by default). */
export const MAX_SUBMIT_BYTES_PER_TXN = 1_000_000;

export type SubmitManyResult =
  | { readonly created: true; readonly revision: bigint }
  | { readonly created: false; readonly existing: readonly (IKeyValue | undefined)[] };

/**
 * submitTasks — submitTask for many distinct task ids in one txn.
 * keys:     tasks/<t> of every task
 * compares: every tasks/<t> absent
 * success:  put every tasks/<t> = TaskRecord (state pending, attempts 0)
 * failure:  get every tasks/<t> (in order; the caller settles the existing ones and submits the
 *           absent ones again)
 * result:   { created, revision } (all created at one revision) or what exists, per task
 */
export async function submitTasks(kv: Kv, keys: KeyLayout, tasks: readonly TaskRecord[]): Promise<SubmitManyResult> {
  if (tasks.length === 0 || tasks.length > MAX_SUBMITS_PER_TXN) {
    throw new RangeError(`submitTasks takes 1 to ${MAX_SUBMITS_PER_TXN} tasks`);
  }
  if (new Set(tasks.map((t) => t.taskId)).size !== tasks.length) throw new RangeError('submitTasks takes distinct ids');
  const res = await kv.txn('submitTasks', {
    compare: tasks.map((t) => cmp.absent(keys.task(t.taskId))),
    success: tasks.map((t) => op.put(keys.task(t.taskId), encodeRecord(t))),
    failure: tasks.map((t) => op.get(keys.task(t.taskId))),
  });
  return res.succeeded
    ? { created: true, revision: res.revision }
    : { created: false, existing: tasks.map((_, i) => firstKv(res, i)) };
}
