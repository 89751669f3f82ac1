/**
 * Task transactions: submit (idempotent by task id), cancel, retry and purge of the HTTP API, and
 * the settlement of an attempt whose lease ended without the holder saying how.
 */
import { encodeRecord, type TaskRecord } from '../../core/records.js';
import type {
  CancelArgs,
  CancelOutcome,
  RewriteOutcome,
  SettleArgs,
  SubmitBatchOutcome,
  TaskRef,
} from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { parseTask } from '../reads.js';

/**
 * cancelTask
 * keys:     tasks/<t>, owners/<r>, holdings/<sid>/<q>
 * compares: tasks/<t> mod_revision == read (a grant rewrites the task, so a grant in between
 *           fails this); if the task is leased: owners/<r> create_revision == the holder's token
 * success:  put tasks/<t> = the cancelled record; if leased: delete owners/<r>,
 *           holdings/<sid>/<q> (the serving coordinator sees the delete in its watch and pushes
 *           lease.revoked; the caller then advances the sink's fence to the cancel revision, so the
 *           holder's late write is refused)
 * failure:  nothing
 * result:   cancelled{revision}, or raced (read again and retry)
 */
export async function cancelTask(kv: Kv, keys: KeyLayout, args: CancelArgs): Promise<CancelOutcome> {
  const taskKey = keys.task(args.task.taskId);
  const ownerKey = keys.owner(args.task.resource);
  const cancelled: TaskRecord = args.next;
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

/**
 * settleLostAttempt — the lease of an open attempt ended without the holder ending the attempt
 * (its session expired or was revoked, its coordinator died): record it, with the backoff, or fail
 * the task when no attempt is left. Any coordinator may run it; the compares let only one land.
 * keys:     tasks/<t>, owners/<r>
 * compares: tasks/<t> mod_revision == T (still the record the grant of token T wrote: the attempt
 *           is open and nothing else closed it); owners/<r> create_revision != T (that grant's
 *           owner key is gone — absent, or another grant's)
 * success:  put tasks/<t> = the settled record
 * failure:  nothing
 * result:   rewritten{revision}, or raced (someone else settled or changed it, or it is still held)
 */
export async function settleLostAttempt(kv: Kv, keys: KeyLayout, args: SettleArgs): Promise<RewriteOutcome> {
  const taskKey = keys.task(args.next.taskId);
  const res = await kv.txn('settleLostAttempt', {
    compare: [cmp.modifiedAt(taskKey, args.token), cmp.notCreatedAt(keys.owner(args.next.resource), args.token)],
    success: [op.put(taskKey, encodeRecord(args.next))],
  });
  return res.succeeded ? { kind: 'rewritten', revision: res.revision } : { kind: 'raced' };
}

/**
 * retryTask — a failed task is pending again with a fresh attempt budget.
 * keys:     tasks/<t>
 * compares: tasks/<t> mod_revision == read (still the failed record the caller saw)
 * success:  put tasks/<t> = the retried record
 * failure:  nothing
 * result:   rewritten{revision}, or raced (read again)
 */
export async function retryTask(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly modRevision: bigint; readonly next: TaskRecord },
): Promise<RewriteOutcome> {
  const taskKey = keys.task(args.next.taskId);
  const res = await kv.txn('retryTask', {
    compare: [cmp.modifiedAt(taskKey, args.modRevision)],
    success: [op.put(taskKey, encodeRecord(args.next))],
  });
  return res.succeeded ? { kind: 'rewritten', revision: res.revision } : { kind: 'raced' };
}

/** purgeTasks takes at most this many tasks (one compare and one delete each). */
export const MAX_PURGES_PER_TXN = 64;

/**
 * purgeTasks — delete terminal tasks the caller read (and judged old enough).
 * keys:     tasks/<t> of every task
 * compares: every tasks/<t> mod_revision == read (unchanged: still terminal, not retried since)
 * success:  delete every tasks/<t>
 * failure:  nothing
 * result:   true when all were deleted (else the caller purges one per txn to tell which)
 */
export async function purgeTasks(kv: Kv, keys: KeyLayout, tasks: readonly TaskRef[]): Promise<boolean> {
  if (tasks.length === 0 || tasks.length > MAX_PURGES_PER_TXN) {
    throw new RangeError(`purgeTasks takes 1 to ${MAX_PURGES_PER_TXN} tasks`);
  }
  const res = await kv.txn(tasks.length === 1 ? 'purgeTask' : 'purgeTasks', {
    compare: tasks.map((t) => cmp.modifiedAt(keys.task(t.taskId), t.modRevision)),
    success: tasks.map((t) => op.del(keys.task(t.taskId))),
  });
  return res.succeeded;
}
