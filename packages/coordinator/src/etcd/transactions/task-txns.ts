/** Task transactions of the HTTP API: submit (idempotent by task id) and cancel. */
import { encodeRecord, type TaskRecord } from '../../core/records.js';
import type { CancelArgs, CancelOutcome, SubmitBatchOutcome } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { parseTask } from '../reads.js';

/**
 * cancelTask
 * keys:     tasks/<t>, owners/<r>, holdings/<sid>/<q>
 * compares: tasks/<t> mod_revision == read (a grant rewrites the task, so a grant in between
 *           fails this); if the task is leased: owners/<r> create_revision == the holder's token
 * success:  put tasks/<t> state=cancelled; if leased: delete owners/<r>, holdings/<sid>/<q>
 *           (the serving coordinator sees the delete in its watch and pushes lease.revoked)
 * failure:  nothing
 * result:   cancelled{revision}, or raced (read again and retry)
 */
export async function cancelTask(kv: Kv, keys: KeyLayout, args: CancelArgs): Promise<CancelOutcome> {
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
  });
  return res.succeeded ? { kind: 'cancelled', revision: res.revision } : { kind: 'raced' };
}

/** submitTasks takes at most this many tasks (one compare, one put and one get each; etcd's limit is 128). */
export const MAX_SUBMITS_PER_TXN = 128;
/** ... and at most this many bytes of records (etcd refuses requests over 1.5 MiB by default). */
export const MAX_SUBMIT_BYTES_PER_TXN = 1_000_000;

/**
 * submitTasks — create one or many tasks with distinct ids in one txn.
 * keys:     tasks/<t> of every task
 * compares: every tasks/<t> absent
 * success:  put every tasks/<t> = TaskRecord (state pending, attempts 0)
 * failure:  get every tasks/<t> (in order)
 * result:   created{revision} (all at one revision), or exists{per task: the stored task,
 *           'unreadable', or undefined when absent} — nothing was created; the caller settles the
 *           existing ones (same definition: 200; another: 409) and submits the absent ones again
 */
export async function submitTasks(kv: Kv, keys: KeyLayout, tasks: readonly TaskRecord[]): Promise<SubmitBatchOutcome> {
  if (tasks.length === 0 || tasks.length > MAX_SUBMITS_PER_TXN) {
    throw new RangeError(`submitTasks takes 1 to ${MAX_SUBMITS_PER_TXN} tasks`);
  }
  if (new Set(tasks.map((t) => t.taskId)).size !== tasks.length) throw new RangeError('submitTasks takes distinct ids');
  const res = await kv.txn(tasks.length === 1 ? 'submitTask' : 'submitTasks', {
    compare: tasks.map((t) => cmp.absent(keys.task(t.taskId))),
    success: tasks.map((t) => op.put(keys.task(t.taskId), encodeRecord(t))),
    failure: tasks.map((t) => op.get(keys.task(t.taskId))),
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
