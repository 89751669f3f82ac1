/**
 * Grant transactions: step (a) of a grant — create the owner key, whose create_revision R is the
 * fencing token — and its undo when step (b), the sink's fence advance, fails. Each classifies its
 * own failure into a typed outcome; callers never read what a compare saw.
 */
import { encodeRecord, type HoldingRecord } from '../../core/records.js';
import type { TaskRecord } from '../../core/task-record.js';
import { CoordinatorError } from '../../errors.js';
import type { AbandonOutcome, AbandonRef, GrantJob, GrantOutcome, GrantRef } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { parseHolding, parseSession } from '../reads.js';
import { encodeChecked, recordWriteOps } from '../record-ops.js';

/**
 * etcd refuses a txn with more than `--max-txn-ops` (default 128) compares, or success ops, or
 * failure ops ("too many operations in txn request"). A grant job takes 4 compares and 4 success
 * ops, so one txn carries at most floor(128 / 4) = 32 jobs — and at most
 * {@link MAX_GRANT_PAYLOAD_BYTES} of payloads read back (the store splits batches by both).
 */
export const ETCD_MAX_TXN_OPS = 128;
export const MAX_GRANTS_PER_TXN = Math.floor(ETCD_MAX_TXN_OPS / 4);
/** Payload bytes one grant txn's reply may carry (32 × 256 KiB would be 8 MiB). */
export const MAX_GRANT_PAYLOAD_BYTES = 2 * 1024 * 1024;

/**
 * A multi-job txn that failed says which jobs lost their race (`raced[i]`: the owner key exists
 * or the task changed, as its failure branch read them at `revision`); the others failed on no
 * compare the txn could see from there (or on a session / request compare), so the caller tries
 * them again as one txn (again after each round that finds a race; one txn each when none does).
 */
export type GrantTxnResult =
  | { readonly kind: 'granted'; readonly token: bigint; readonly payloads: readonly (string | undefined)[] }
  | Exclude<GrantOutcome, { readonly kind: 'granted' }>
  | { readonly kind: 'batchFailed'; readonly raced: readonly boolean[]; readonly revision: bigint };

/**
 * grantOwners — many grants in one txn (only for resources believed free).
 * keys:     per job: owners/<r>, tasks/<t>, sessions/<sid>, holdings/<sid>/<q>
 * compares: per job: owners/<r> absent; tasks/<t> mod_revision == read (still pending, unchanged);
 *           sessions/<sid> mod_revision == known (session alive and served here);
 *           holdings/<sid>/<q> absent (this request id holds no grant)
 * success:  per job: put owners/<r> = OwnerRecord (session lease); put holdings/<sid>/<q> =
 *           HoldingRecord (session lease); put tasks/<t> = the job's next record (one more attempt,
 *           opened: so while the attempt is open, the task key's mod_revision is its token); get
 *           inputs/<t> (the payload the grant delivers, without another round trip)
 * failure:  single job: get sessions/<sid>, holdings/<sid>/<q>; several jobs: per job get
 *           owners/<r>, tasks/<t> (2 per job: at most 64 ops)
 * result:   granted{token R, payloads} where R = the txn revision, which is the create_revision of
 *           every owner key created: each was absent (compare) and is put by this txn, and etcd
 *           gives all keys a txn creates its one revision (no read-back needed). A single job's failure is
 *           classified: the holding exists -> replay{holding}; the session key is gone or has
 *           another mod_revision -> sessionMoved; otherwise (owner present or task changed) ->
 *           raced{revision}. A batch's failure -> batchFailed{raced per job, revision}: a job whose
 *           owner key exists or whose task key is gone or changed lost its race (another grant
 *           took the resource or the task — with several coordinators, usually a peer's); the
 *           others are tried again (the store: as one txn while each round finds a race,
 *           one txn each once a round finds none).
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
    cmp.absent(keys.holding(j.sessionId, j.requestId)),
  ]);
  const success = jobs.flatMap((j) => {
    const holding: HoldingRecord = { v: 1, taskId: j.task.taskId, resource: j.task.resource, attempt: j.owner.attempt };
    return [
      op.put(keys.owner(j.task.resource), encodeRecord(j.owner), j.leaseId),
      op.put(keys.holding(j.sessionId, j.requestId), encodeRecord(holding), j.leaseId),
      op.put(keys.task(j.task.taskId), encodeChecked(j.next)),
      op.get(keys.input(j.task.taskId)),
    ];
  });
  const single = jobs.length === 1 ? jobs[0] : undefined;
  const failure =
    single === undefined
      ? jobs.flatMap((j) => [op.get(keys.owner(j.task.resource)), op.get(keys.task(j.task.taskId))])
      : [op.get(keys.session(single.sessionId)), op.get(keys.holding(single.sessionId, single.requestId))];
  const res = await kv.txn(jobs.length === 1 ? 'grantOwner' : 'grantOwners', { compare, success, failure });
  if (res.succeeded) {
    return { kind: 'granted', token: res.revision, payloads: jobs.map((_, i) => firstKv(res, 4 * i + 3)?.value) };
  }
  if (single === undefined) {
    const raced = jobs.map(
      (j, i) => firstKv(res, 2 * i) !== undefined || firstKv(res, 2 * i + 1)?.modRevision !== j.taskModRevision,
    );
    return { kind: 'batchFailed', raced, revision: res.revision };
  }
  const holding = parseHolding(firstKv(res, 1));
  if (holding !== undefined) return { kind: 'replay', holding };
  const session = parseSession(keys, firstKv(res, 0));
  if (session?.modRevision !== single.sessionModRevision) return { kind: 'sessionMoved' };
  return { kind: 'raced', revision: res.revision };
}

/**
 * abandonAttempt — the fence advance failed or was refused: the grant is never sent, and its
 * attempt is closed (given back, with the task's own backoff for abandoned grants).
 * keys:     owners/<r>, holdings/<sid>/<q>, tasks/<t>, history/<t>#<n>
 * compares: owners/<r> create_revision == R; holdings/<sid>/<q> create_revision == R;
 *           tasks/<t> mod_revision == R (the record is still the one the grant wrote)
 * success:  delete owners/<r>, holdings/<sid>/<q>; put tasks/<t> = the abandoned record and its
 *           history entry
 * failure:  nothing (then abandonGrant, which does not touch the task)
 * result:   true when done
 */
export async function abandonAttempt(
  kv: Kv,
  keys: KeyLayout,
  args: GrantRef & { readonly next: TaskRecord },
): Promise<boolean> {
  const ownerKey = keys.owner(args.resource);
  const holdingKey = keys.holding(args.sessionId, args.requestId);
  const taskKey = keys.task(args.next.taskId);
  const res = await kv.txn('abandonAttempt', {
    compare: [
      cmp.createdAt(ownerKey, args.token),
      cmp.createdAt(holdingKey, args.token),
      cmp.modifiedAt(taskKey, args.token),
    ],
    success: [
      op.del(ownerKey),
      op.del(holdingKey),
      // The abandon closes the attempt the grant opened: one more ended attempt than before.
      ...recordWriteOps(keys, { next: args.next }, Math.max(0, (args.next.endedAttempts ?? 1) - 1)),
    ],
  });
  return res.succeeded;
}

/**
 * abandonGrant — the fence advance failed or was refused: the grant is never sent.
 * keys:     owners/<r>, holdings/<sid>/<q>
 * compares: owners/<r> create_revision == R (still ours); holdings/<sid>/<q> create_revision == R
 * success:  delete owners/<r>, holdings/<sid>/<q>
 * failure:  nothing (the owner key is already gone; see forgetRequest)
 * result:   true when removed
 */
export async function abandonGrant(kv: Kv, keys: KeyLayout, args: GrantRef): Promise<boolean> {
  const ownerKey = keys.owner(args.resource);
  const holdingKey = keys.holding(args.sessionId, args.requestId);
  const res = await kv.txn('abandonGrant', {
    compare: [cmp.createdAt(ownerKey, args.token), cmp.createdAt(holdingKey, args.token)],
    success: [op.del(ownerKey), op.del(holdingKey)],
  });
  return res.succeeded;
}

/**
 * forgetRequest — drop the holding of a grant whose owner key is gone, so a retry of the same
 * request id starts afresh instead of replaying a dead grant.
 * keys:     holdings/<sid>/<q>
 * compares: holdings/<sid>/<q> create_revision == R
 * success:  delete holdings/<sid>/<q>
 * result:   true when removed
 */
export async function forgetRequest(kv: Kv, keys: KeyLayout, args: GrantRef): Promise<boolean> {
  const holdingKey = keys.holding(args.sessionId, args.requestId);
  const res = await kv.txn('forgetRequest', {
    compare: [cmp.createdAt(holdingKey, args.token)],
    success: [op.del(holdingKey)],
  });
  return res.succeeded;
}

/**
 * abandonAttempt (when the task's next record is given), else abandonGrant, then forgetRequest
 * when the owner key was already gone.
 */
export async function undoGrant(kv: Kv, keys: KeyLayout, ref: AbandonRef): Promise<AbandonOutcome> {
  const next = ref.next;
  if (next !== undefined && (await abandonAttempt(kv, keys, { ...ref, next }))) return 'closed';
  if (await abandonGrant(kv, keys, ref)) return 'removed';
  return (await forgetRequest(kv, keys, ref)) ? 'forgotten' : 'gone';
}
