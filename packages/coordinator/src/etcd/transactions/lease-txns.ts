/**
 * Transactions of a held lease: complete (record the result, free the resource) and release (free
 * it without a result). Both prove the caller is the holder in etcd itself: the owner key was
 * created at the worker's token, never rewritten since, and is attached to the caller's session
 * lease.
 */
import type { IKeyValue } from 'etcd3';
import { encodeRecord, type TaskRecord } from '../../core/records.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';

export interface HolderProof {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly resource: string;
  readonly token: bigint;
  /** The request id the grant was made for (its holding key), from the owner record. */
  readonly requestId: string;
}

/** 4 compares: the owner key is this grant's, unchanged, on this session's lease; so is its holding. */
function holderCompares(keys: KeyLayout, proof: HolderProof) {
  const ownerKey = keys.owner(proof.resource);
  return [
    cmp.createdAt(ownerKey, proof.token),
    cmp.modifiedAt(ownerKey, proof.token),
    cmp.leaseIs(ownerKey, proof.leaseId),
    cmp.createdAt(keys.holding(proof.sessionId, proof.requestId), proof.token),
  ];
}

/** The keys a held lease ends with: the owner key and its holding. */
function holderDeletes(keys: KeyLayout, proof: HolderProof) {
  return [op.del(keys.owner(proof.resource)), op.del(keys.holding(proof.sessionId, proof.requestId))];
}

export type LeaseTxnResult =
  | { readonly ok: true; readonly revision: bigint }
  | { readonly ok: false; readonly owner: IKeyValue | undefined; readonly task?: IKeyValue | undefined };

/**
 * completeTask
 * keys:     owners/<r>, holdings/<sid>/<q>, tasks/<t>
 * compares: owners/<r> create_revision == token and mod_revision == token and lease == session
 *           lease (this session holds this token); holdings/<sid>/<q> create_revision == token;
 *           tasks/<t> mod_revision == read (unchanged)
 * success:  delete owners/<r>, holdings/<sid>/<q>; put tasks/<t> state=completed,
 *           result={resultId, token}
 * failure:  get owners/<r>, get tasks/<t>
 * result:   { ok, revision }; on failure what was seen (a retry after a lost reply finds the task
 *           completed with this token and result id, and is answered as a replay)
 */
export async function completeTask(
  kv: Kv,
  keys: KeyLayout,
  args: HolderProof & { readonly task: TaskRecord; readonly taskModRevision: bigint; readonly resultId: string },
): Promise<LeaseTxnResult> {
  const completed: TaskRecord = {
    ...args.task,
    state: 'completed',
    result: { resultId: args.resultId, token: args.token.toString() },
  };
  const taskKey = keys.task(args.task.taskId);
  const res = await kv.txn('completeTask', {
    compare: [...holderCompares(keys, args), cmp.modifiedAt(taskKey, args.taskModRevision)],
    success: [...holderDeletes(keys, args), op.put(taskKey, encodeRecord(completed))],
    failure: [op.get(keys.owner(args.resource)), op.get(taskKey)],
  });
  return res.succeeded
    ? { ok: true, revision: res.revision }
    : { ok: false, owner: firstKv(res, 0), task: firstKv(res, 1) };
}

export interface CompleteJob extends HolderProof {
  readonly task: TaskRecord;
  readonly taskModRevision: bigint;
  readonly resultId: string;
}

function completedRecord(job: CompleteJob): TaskRecord {
  return { ...job.task, state: 'completed', result: { resultId: job.resultId, token: job.token.toString() } };
}

/** completeTasks takes at most this many completions (5 compares each; etcd's default limit is 128). */
export const MAX_COMPLETES_PER_TXN = 25;

/**
 * completeTasks — completeTask for many leases (distinct resources and tasks) in one txn.
 * keys:     per completion: owners/<r>, holdings/<sid>/<q>, tasks/<t>
 * compares: per completion: as completeTask (holder proof on owners/<r>; tasks/<t> mod_revision ==
 *           the one known, here from the watch-fed index)
 * success:  per completion: as completeTask
 * failure:  nothing (the caller falls back to one completeTask per completion to tell which failed)
 * result:   the txn revision when every completion succeeded (all at that revision), else undefined
 */
export async function completeTasks(
  kv: Kv,
  keys: KeyLayout,
  jobs: readonly CompleteJob[],
): Promise<bigint | undefined> {
  if (
    jobs.length > MAX_COMPLETES_PER_TXN ||
    new Set(jobs.map((j) => j.resource)).size !== jobs.length ||
    new Set(jobs.map((j) => j.task.taskId)).size !== jobs.length
  ) {
    throw new RangeError('completeTasks takes distinct resources and tasks, at most MAX_COMPLETES_PER_TXN');
  }
  const res = await kv.txn('completeTasks', {
    compare: jobs.flatMap((j) => [
      ...holderCompares(keys, j),
      cmp.modifiedAt(keys.task(j.task.taskId), j.taskModRevision),
    ]),
    success: jobs.flatMap((j) => [
      ...holderDeletes(keys, j),
      op.put(keys.task(j.task.taskId), encodeRecord(completedRecord(j))),
    ]),
  });
  return res.succeeded ? res.revision : undefined;
}

/**
 * releaseLease — give the lease up without a result; the task is pending again.
 * keys:     owners/<r>, holdings/<sid>/<q>
 * compares: owners/<r> create_revision == token, mod_revision == token, lease == session lease;
 *           holdings/<sid>/<q> create_revision == token
 * success:  delete owners/<r>, holdings/<sid>/<q>
 * failure:  get owners/<r>
 * result:   { ok, revision }
 */
export async function releaseLease(kv: Kv, keys: KeyLayout, args: HolderProof): Promise<LeaseTxnResult> {
  const res = await kv.txn('releaseLease', {
    compare: holderCompares(keys, args),
    success: holderDeletes(keys, args),
    failure: [op.get(keys.owner(args.resource))],
  });
  return res.succeeded ? { ok: true, revision: res.revision } : { ok: false, owner: firstKv(res, 0) };
}

/** releaseLeases takes at most this many releases (4 compares each; etcd's default limit is 128). */
export const MAX_RELEASES_PER_TXN = 32;

/**
 * releaseLeases — releaseLease for many leases (distinct resources) in one txn.
 * keys:     per release: owners/<r>, holdings/<sid>/<q>
 * compares: per release: as releaseLease
 * success:  per release: delete owners/<r>, holdings/<sid>/<q>
 * failure:  nothing (the caller falls back to one releaseLease per lease to tell which failed)
 * result:   the txn revision when every release succeeded (all at that revision), else undefined
 */
export async function releaseLeases(
  kv: Kv,
  keys: KeyLayout,
  proofs: readonly HolderProof[],
): Promise<bigint | undefined> {
  if (proofs.length > MAX_RELEASES_PER_TXN || new Set(proofs.map((p) => p.resource)).size !== proofs.length) {
    throw new RangeError('releaseLeases takes distinct resources, at most MAX_RELEASES_PER_TXN');
  }
  const res = await kv.txn('releaseLeases', {
    compare: proofs.flatMap((p) => holderCompares(keys, p)),
    success: proofs.flatMap((p) => holderDeletes(keys, p)),
  });
  return res.succeeded ? res.revision : undefined;
}
