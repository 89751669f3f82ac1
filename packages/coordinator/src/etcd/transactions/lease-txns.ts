/**
 * Transactions of a held lease: end the attempt (complete with a result, fail, or release) and free
 * the resource. They prove the caller is the holder in etcd itself: the owner key was created at
 * the worker's token, never rewritten since, and is attached to the caller's session lease.
 */
import type { FinishJob, HolderProof, LeaseOutcome } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import type { TxnSpec } from '../backend.js';
import { cmp, op, type Kv } from '../kv.js';
import { recordWriteOps } from '../record-ops.js';

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

/**
 * finishAttempts takes at most this many jobs. With several, each job is a nested txn (5 compares,
 * 5 success ops; a job of a layout-v1 record, whose moves add up to 11 ops, goes alone), and etcd's
 * default limit of 128 ops leaves each of 25 nested txns 103.
 */
export const MAX_FINISHES_PER_TXN = 25;

/** One finish's compares and success ops (see {@link finishAttempts}). */
function finishSpec(keys: KeyLayout, j: FinishJob): TxnSpec {
  return {
    compare: [...holderCompares(keys, j), cmp.modifiedAt(keys.task(j.next.taskId), j.taskModRevision)],
    // Every finish closes the attempt the grant opened: one more ended attempt than the record read.
    success: [...holderDeletes(keys, j), ...recordWriteOps(keys, j, Math.max(0, (j.next.endedAttempts ?? 1) - 1))],
  };
}

/**
 * finishAttempts — end one or many held leases (distinct resources and tasks) in one txn, each
 * judged on its own: each job's task record is replaced by the one the lifecycle computed
 * (completed with its result; failed, or pending after a backoff; pending again after a release).
 * keys:     per job: owners/<r>, holdings/<sid>/<q>, tasks/<t>, history/<t>#<n>, history/<t>#<n-10>
 * compares: per job: owners/<r> create_revision == token and mod_revision == token and
 *           lease == session lease (this session holds this token); holdings/<sid>/<q>
 *           create_revision == token; tasks/<t> mod_revision == the one known (unchanged since
 *           read: the record written is computed from it)
 * success:  per job: delete owners/<r>, holdings/<sid>/<q>; put tasks/<t> = the job's next record,
 *           put its ended attempt as history/<t>#<n>, delete history/<t>#<n-10> (a v1 record: its
 *           payload and history moved out too)
 * failure:  nothing
 * shape:    one job: that txn. Several: a txn without compares whose success ops are one nested txn
 *           per job, judged on the store before the txn (see grantOwners), so a job whose holder
 *           lost the lease fails no other.
 * result:   per job, done{revision} (every done job at the txn's revision), or notHolder (a retry
 *           after a lost reply is recognised by the caller from the task record, e.g. its recorded
 *           result)
 */
export async function finishAttempts(
  kv: Kv,
  keys: KeyLayout,
  jobs: readonly FinishJob[],
): Promise<readonly LeaseOutcome[]> {
  if (
    jobs.length === 0 ||
    jobs.length > MAX_FINISHES_PER_TXN ||
    new Set(jobs.map((j) => j.resource)).size !== jobs.length ||
    new Set(jobs.map((j) => j.next.taskId)).size !== jobs.length
  ) {
    throw new RangeError('finishAttempts takes 1 to MAX_FINISHES_PER_TXN distinct resources and tasks');
  }
  return kv.txnEach(
    { one: 'finishAttempt', many: 'finishAttempts' },
    jobs,
    (j) => finishSpec(keys, j),
    (_, res, revision): LeaseOutcome => (res.succeeded ? { kind: 'done', revision } : { kind: 'notHolder' }),
  );
}
