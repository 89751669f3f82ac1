/**
 * Grant transactions: step (a) of a grant — create the owner key, whose create_revision R is the
 * fencing token — and its undo when step (b), the sink's fence advance, fails. Each classifies its
 * own failure into a typed outcome; callers never read what a compare saw.
 */
import { encodeRecord, type HoldingRecord } from '../../core/records.js';
import type { TaskRecord } from '../../core/task-record.js';
import { CoordinatorError } from '../../errors.js';
import type { AbandonOutcome, AbandonRef, GrantJob, GrantOutcome, GrantRef } from '../../store/port.js';
import type { Compare, KeyValue, NestedResult, Op, TxnOptions, TxnSpec } from '../backend.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { parseHolding, parseSession } from '../reads.js';
import { GET_REPLY_BYTES } from '../combining-backend.js';
import { encodeChecked, recordWriteOps } from '../record-ops.js';

/**
 * etcd refuses a txn with more than `--max-txn-ops` (default 128) compares, or success ops, or
 * failure ops ("too many operations in txn request"), and a nested txn with more than its parent
 * left. A grant batch is one nested txn per job (4 compares, 4 success ops, 4 failure ops) under a
 * txn of one op per job, so 32 jobs leave each nested txn 96 — and at most
 * {@link MAX_GRANT_PAYLOAD_BYTES} of payloads read back (the store splits batches by both).
 */
export const ETCD_MAX_TXN_OPS = 128;
export const MAX_GRANTS_PER_TXN = Math.floor(ETCD_MAX_TXN_OPS / 4);
/** Payload bytes one grant txn's reply may carry (32 × 256 KiB would be 8 MiB). */
export const MAX_GRANT_PAYLOAD_BYTES = 2 * 1024 * 1024;

/** A granted job's token and the payload read back, or why it was not granted. */
export type GrantTxnOutcome =
  | { readonly kind: 'granted'; readonly token: bigint; readonly payload: string | undefined }
  | Exclude<GrantOutcome, { readonly kind: 'granted' }>;

/**
 * One grant's txn (see {@link grantOwners}): compares, success ops and the failure branch's reads.
 * Read its result with {@link grantOutcomeOf}. Also nested under a finish (lease-txns.ts, a
 * completion's carried acquire).
 */
export function grantTxnSpec(keys: KeyLayout, j: GrantJob): TxnSpec {
  return {
    ...grantSpec(keys, j),
    failure: [op.get(keys.session(j.sessionId)), op.get(keys.holding(j.sessionId, j.requestId))],
  };
}

/** What a grant txn of {@link grantTxnSpec} did, from its result at `revision`. */
export function grantOutcomeOf(keys: KeyLayout, j: GrantJob, res: NestedResult, revision: bigint): GrantTxnOutcome {
  return res.succeeded
    ? { kind: 'granted', token: revision, payload: firstKv(res, 3)?.value }
    : failedGrant(keys, j, firstKv(res, 0), firstKv(res, 1), revision);
}

/** The most a grant txn's reply carries: its payload (success) or its session and holding (failure). */
export function grantReplyBytes(j: GrantJob): number {
  return Math.max(j.next.payloadBytes + 1024, 2 * GET_REPLY_BYTES);
}

/** One grant's compares and success ops (see {@link grantOwners}). */
function grantSpec(keys: KeyLayout, j: GrantJob): { compare: Compare[]; success: Op[] } {
  const holding: HoldingRecord = { v: 1, taskId: j.task.taskId, resource: j.task.resource, attempt: j.owner.attempt };
  return {
    compare: [
      cmp.absent(keys.owner(j.task.resource)),
      cmp.modifiedAt(keys.task(j.task.taskId), j.taskModRevision),
      cmp.modifiedAt(keys.session(j.sessionId), j.sessionModRevision),
      cmp.absent(keys.holding(j.sessionId, j.requestId)),
    ],
    success: [
      op.put(keys.owner(j.task.resource), encodeRecord(j.owner), j.leaseId),
      op.put(keys.holding(j.sessionId, j.requestId), encodeRecord(holding), j.leaseId),
      op.put(keys.task(j.task.taskId), encodeChecked(j.next)),
      op.get(keys.input(j.task.taskId)),
    ],
  };
}

/**
 * Why a grant's compares failed, from its failure branch's reads of its session and holding (at
 * `revision`): the holding exists -> replay; the session key is gone or has another mod_revision ->
 * sessionMoved; otherwise (the owner key exists or the task changed: another grant took the
 * resource or the task — with several coordinators, usually a peer's) -> raced.
 */
function failedGrant(
  keys: KeyLayout,
  j: GrantJob,
  session: KeyValue | undefined,
  held: KeyValue | undefined,
  revision: bigint,
): Exclude<GrantTxnOutcome, { readonly kind: 'granted' }> {
  const holding = parseHolding(held);
  if (holding !== undefined) return { kind: 'replay', holding };
  if (parseSession(keys, session)?.modRevision !== j.sessionModRevision) return { kind: 'sessionMoved' };
  return { kind: 'raced', revision };
}

/**
 * grantOwners — grants in one txn (only for resources believed free), each judged on its own.
 * keys:     per job: owners/<r>, tasks/<t>, sessions/<sid>, holdings/<sid>/<q>
 * compares: per job: owners/<r> absent; tasks/<t> mod_revision == read (still pending, unchanged);
 *           sessions/<sid> mod_revision == known (session alive and served here);
 *           holdings/<sid>/<q> absent (this request id holds no grant)
 * success:  per job: put owners/<r> = OwnerRecord (session lease); put holdings/<sid>/<q> =
 *           HoldingRecord (session lease); put tasks/<t> = the job's next record (one more attempt,
 *           opened: so while the attempt is open, the task key's mod_revision is its token); get
 *           inputs/<t> (the payload the grant delivers, without another round trip)
 * failure:  per job: get sessions/<sid>, holdings/<sid>/<q>
 * shape:    one job: that txn. Several: a txn without compares whose success ops are one nested txn
 *           per job (compares, success and failure above). etcd judges every nested compare on the
 *           store before the txn, so each job is granted exactly when its own compares hold, as if
 *           it ran alone at that point, and a job that lost its race fails no other.
 * result:   per job, granted{token R, payload} where R = the txn revision, which is the
 *           create_revision of every owner key created: each was absent (compare) and is put by
 *           this txn, and etcd gives all keys a txn creates its one revision (no read-back needed);
 *           or, from the job's failure branch, replay{holding}, sessionMoved or raced{revision}
 *           ({@link failedGrant}).
 */
export async function grantOwners(
  kv: Kv,
  keys: KeyLayout,
  jobs: readonly GrantJob[],
  options?: TxnOptions,
): Promise<readonly GrantTxnOutcome[]> {
  if (jobs.length === 0) throw new CoordinatorError('INTERNAL', 'grantOwners needs at least one job');
  if (jobs.length > MAX_GRANTS_PER_TXN) {
    throw new CoordinatorError('INTERNAL', `grantOwners takes at most ${MAX_GRANTS_PER_TXN} jobs per txn`);
  }
  return kv.txnEach(
    { one: 'grantOwner', many: 'grantOwners' },
    jobs,
    (j) => grantTxnSpec(keys, j),
    (j, res, revision) => grantOutcomeOf(keys, j, res, revision),
    // The reply: per job its payload (success) or its session and holding (failure).
    { ...options, replyBytes: jobs.reduce((n, j) => n + grantReplyBytes(j), 0) },
  );
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
