/**
 * Grant transactions: step (a) of a grant — create the owner key, whose create_revision R is the
 * fencing token — and its undo when step (b), the sink's fence advance, fails.
 */
import type { IKeyValue } from 'etcd3';
import { encodeRecord, type OwnerRecord, type RequestRecord, type TaskRecord } from '../../core/records.js';
import { CoordinatorError } from '../../errors.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';

export interface GrantJob {
  readonly sessionId: string;
  readonly leaseId: string;
  /** sessions/<sid> mod_revision this coordinator knows: it still serves the session. */
  readonly sessionModRevision: bigint;
  readonly requestId: string;
  /** The task as read, and the mod_revision it was read at: it is still pending and unchanged. */
  readonly task: TaskRecord;
  readonly taskModRevision: bigint;
  readonly owner: OwnerRecord;
}

/**
 * etcd refuses a txn with more than `--max-txn-ops` (default 128) compares, or success ops, or
 * failure ops ("too many operations in txn request"). A grant job takes 4 compares and 5 success
 * ops (4 puts + the owner read-back), so one txn carries at most floor(128 / 5) = 25 jobs.
 */
export const ETCD_MAX_TXN_OPS = 128;
export const MAX_GRANTS_PER_TXN = Math.floor(ETCD_MAX_TXN_OPS / 5);

export type GrantTxnResult =
  | { readonly ok: true; readonly token: bigint }
  | {
      readonly ok: false;
      /** Only for a single-job txn: what the compares saw. */
      readonly seen?: {
        readonly owner: IKeyValue | undefined;
        readonly task: IKeyValue | undefined;
        readonly session: IKeyValue | undefined;
        readonly request: IKeyValue | undefined;
      };
      readonly revision: bigint;
    };

/**
 * grantOwners — many grants in one txn (only for resources believed free).
 * keys:     per job: owners/<r>, tasks/<t>, sessions/<sid>, requests/<sid>/<q>, holdings/<sid>/<r>
 * compares: per job: owners/<r> absent; tasks/<t> mod_revision == read (still pending, unchanged);
 *           sessions/<sid> mod_revision == known (session alive and served here);
 *           requests/<sid>/<q> absent (this request id was not granted yet)
 * success:  per job: put owners/<r> = OwnerRecord (session lease); put holdings/<sid>/<r> (session
 *           lease); put requests/<sid>/<q> = RequestRecord (session lease); put tasks/<t> with
 *           attempts + 1; then get owners/<r> of every job
 * failure:  single job only: get owners/<r>, tasks/<t>, sessions/<sid>, requests/<sid>/<q>
 * result:   { ok, token R } where R = the txn revision = create_revision of every owner key created
 *           (checked); on failure the caller falls back to one txn per job
 */
export async function grantOwners(kv: Kv, keys: KeyLayout, jobs: readonly GrantJob[]): Promise<GrantTxnResult> {
  if (jobs.length === 0) throw new CoordinatorError('INTERNAL', 'grantOwners needs at least one job');
  if (jobs.length > MAX_GRANTS_PER_TXN) {
    throw new CoordinatorError('INTERNAL', `grantOwners takes at most ${MAX_GRANTS_PER_TXN} jobs per txn`);
  }
  const compare = jobs.flatMap((j) => [
    cmp.absent(keys.owner(j.task.resource)),
    cmp.modifiedAt(keys.task(j.task.taskId), j.taskModRevision),
    cmp.modifiedAt(keys.session(j.sessionId), j.sessionModRevision),
    cmp.absent(keys.request(j.sessionId, j.requestId)),
  ]);
  const success = jobs.flatMap((j) => {
    const request: RequestRecord = { v: 1, taskId: j.task.taskId, resource: j.task.resource, attempt: j.owner.attempt };
    const task: TaskRecord = { ...j.task, attempts: j.task.attempts + 1 };
    return [
      op.put(keys.owner(j.task.resource), encodeRecord(j.owner), j.leaseId),
      op.put(keys.holding(j.sessionId, j.task.resource), encodeRecord({ v: 1, taskId: j.task.taskId }), j.leaseId),
      op.put(keys.request(j.sessionId, j.requestId), encodeRecord(request), j.leaseId),
      op.put(keys.task(j.task.taskId), encodeRecord(task)),
    ];
  });
  const reads = jobs.map((j) => op.get(keys.owner(j.task.resource)));
  const single = jobs.length === 1 ? jobs[0] : undefined;
  const failure =
    single === undefined
      ? []
      : [
          op.get(keys.owner(single.task.resource)),
          op.get(keys.task(single.task.taskId)),
          op.get(keys.session(single.sessionId)),
          op.get(keys.request(single.sessionId, single.requestId)),
        ];
  const res = await kv.txn(jobs.length === 1 ? 'grantOwner' : 'grantOwners', {
    compare,
    success: [...success, ...reads],
    failure,
  });
  if (!res.succeeded) {
    return single === undefined
      ? { ok: false, revision: res.revision }
      : {
          ok: false,
          revision: res.revision,
          seen: { owner: firstKv(res, 0), task: firstKv(res, 1), session: firstKv(res, 2), request: firstKv(res, 3) },
        };
  }
  for (let i = 0; i < jobs.length; i += 1) {
    const created = firstKv(res, success.length + i);
    if (created === undefined || BigInt(created.create_revision) !== res.revision) {
      throw new CoordinatorError('INTERNAL', 'owner key create_revision differs from the grant txn revision');
    }
  }
  return { ok: true, token: res.revision };
}

/**
 * abandonGrant — the fence advance failed or was refused: the grant is never sent.
 * keys:     owners/<r>, holdings/<sid>/<r>, requests/<sid>/<q>
 * compares: owners/<r> create_revision == R (still ours); requests/<sid>/<q> create_revision == R
 * success:  delete owners/<r>, holdings/<sid>/<r>, requests/<sid>/<q>
 * failure:  nothing (the owner key is already gone; see forgetRequest)
 * result:   true when removed
 */
export async function abandonGrant(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly sessionId: string; readonly requestId: string; readonly resource: string; readonly token: bigint },
): Promise<boolean> {
  const ownerKey = keys.owner(args.resource);
  const requestKey = keys.request(args.sessionId, args.requestId);
  const res = await kv.txn('abandonGrant', {
    compare: [cmp.createdAt(ownerKey, args.token), cmp.createdAt(requestKey, args.token)],
    success: [op.del(ownerKey), op.del(keys.holding(args.sessionId, args.resource)), op.del(requestKey)],
  });
  return res.succeeded;
}

/**
 * forgetRequest — drop the request record of a grant whose owner key is gone, so a retry of the
 * same request id starts afresh instead of replaying a dead grant.
 * keys:     requests/<sid>/<q>
 * compares: requests/<sid>/<q> create_revision == R
 * success:  delete requests/<sid>/<q>
 * result:   true when removed
 */
export async function forgetRequest(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly sessionId: string; readonly requestId: string; readonly token: bigint },
): Promise<boolean> {
  const requestKey = keys.request(args.sessionId, args.requestId);
  const res = await kv.txn('forgetRequest', {
    compare: [cmp.createdAt(requestKey, args.token)],
    success: [op.del(requestKey)],
  });
  return res.succeeded;
}
