/**
 * Transactions of a held lease: complete (record the result, free the resource) and release (free
 * it without a result). Both prove the caller is the holder in etcd itself: the owner key was
 * created at the worker's token, never rewritten since, and is attached to the caller's session
 * lease.
 */
import { encodeRecord, type TaskRecord } from '../../core/records.js';
import type { CompleteJob, HolderProof, LeaseOutcome } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import { cmp, op, type Kv } from '../kv.js';

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

function completedRecord(job: CompleteJob): TaskRecord {
  return { ...job.task, state: 'completed', result: { resultId: job.resultId, token: job.token.toString() } };
}

/** completeTasks takes at most this many completions (5 compares each; etcd's default limit is 128). */
export const MAX_COMPLETES_PER_TXN = 25;

/**
 * completeTasks — complete one or many leases (distinct resources and tasks) in one txn.
 * keys:     per completion: owners/<r>, holdings/<sid>/<q>, tasks/<t>
 * compares: per completion: owners/<r> create_revision == token and mod_revision == token and
 *           lease == session lease (this session holds this token); holdings/<sid>/<q>
 *           create_revision == token; tasks/<t> mod_revision == the one known (unchanged)
 * success:  per completion: delete owners/<r>, holdings/<sid>/<q>; put tasks/<t> state=completed,
 *           result={resultId, token}
 * failure:  nothing
 * result:   done{revision} when every completion succeeded (all at that revision), else notHolder
 *           (for a batch: retry one txn per completion to tell which; a retry after a lost reply is
 *           recognised by the caller from the task's recorded result)
 */
export async function completeTasks(kv: Kv, keys: KeyLayout, jobs: readonly CompleteJob[]): Promise<LeaseOutcome> {
  if (
    jobs.length === 0 ||
    jobs.length > MAX_COMPLETES_PER_TXN ||
    new Set(jobs.map((j) => j.resource)).size !== jobs.length ||
    new Set(jobs.map((j) => j.task.taskId)).size !== jobs.length
  ) {
    throw new RangeError('completeTasks takes 1 to MAX_COMPLETES_PER_TXN distinct resources and tasks');
  }
  const res = await kv.txn(jobs.length === 1 ? 'completeTask' : 'completeTasks', {
    compare: jobs.flatMap((j) => [
      ...holderCompares(keys, j),
      cmp.modifiedAt(keys.task(j.task.taskId), j.taskModRevision),
    ]),
    success: jobs.flatMap((j) => [
      ...holderDeletes(keys, j),
      op.put(keys.task(j.task.taskId), encodeRecord(completedRecord(j))),
    ]),
  });
  return res.succeeded ? { kind: 'done', revision: res.revision } : { kind: 'notHolder' };
}

/** releaseLeases takes at most this many releases (4 compares each; etcd's default limit is 128). */
export const MAX_RELEASES_PER_TXN = 32;

/**
 * releaseLeases — give one or many leases (distinct resources) up without a result; their tasks
 * are pending again.
 * keys:     per release: owners/<r>, holdings/<sid>/<q>
 * compares: per release: owners/<r> create_revision == token, mod_revision == token, lease ==
 *           session lease; holdings/<sid>/<q> create_revision == token
 * success:  per release: delete owners/<r>, holdings/<sid>/<q>
 * failure:  nothing
 * result:   done{revision} when every release succeeded (all at that revision), else notHolder
 *           (for a batch: retry one txn per release to tell which)
 */
export async function releaseLeases(kv: Kv, keys: KeyLayout, proofs: readonly HolderProof[]): Promise<LeaseOutcome> {
  if (
    proofs.length === 0 ||
    proofs.length > MAX_RELEASES_PER_TXN ||
    new Set(proofs.map((p) => p.resource)).size !== proofs.length
  ) {
    throw new RangeError('releaseLeases takes 1 to MAX_RELEASES_PER_TXN distinct resources');
  }
  const res = await kv.txn(proofs.length === 1 ? 'releaseLease' : 'releaseLeases', {
    compare: proofs.flatMap((p) => holderCompares(keys, p)),
    success: proofs.flatMap((p) => holderDeletes(keys, p)),
  });
  return res.succeeded ? { kind: 'done', revision: res.revision } : { kind: 'notHolder' };
}
