/**
 * Transactions of a held lease: end the attempt (complete with a result, fail, or release) and free
 * the resource. They prove the caller is the holder in etcd itself: the owner key was created at
 * the worker's token, never rewritten since, and is attached to the caller's session lease.
 */
import type { FinishJob, GrantJob, GrantOutcome, HolderProof, LeaseOutcome } from '../../store/port.js';
import type { KeyLayout } from '../keys.js';
import type { NestedResult, TxnSpec } from '../backend.js';
import { cmp, nestedResult, op, type Kv } from '../kv.js';
import { recordWriteOps } from '../record-ops.js';
import { grantOutcomeOf, grantReplyBytes, grantTxnSpec } from './grant-txns.js';

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
 * 5 success ops, 6 with a carried grant, whose own nested txn has 4 compares, 4 success and 2
 * failure ops; a job of a layout-v1 record, whose moves add up to 11 ops, goes alone), and etcd's
 * default limit of 128 ops leaves each of 25 nested txns 103, and a carried grant under one 97.
 */
export const MAX_FINISHES_PER_TXN = 25;

/** One finish's compares and success ops, its carried grant last (see {@link finishAttempts}). */
function finishSpec(keys: KeyLayout, j: FinishJob): TxnSpec {
  const success = [
    ...holderDeletes(keys, j),
    // Every finish closes the attempt the grant opened: one more ended attempt than the record read.
    ...recordWriteOps(keys, j, Math.max(0, (j.next.endedAttempts ?? 1) - 1)),
  ];
  if (j.carried !== undefined) success.push(op.txn(grantTxnSpec(keys, j.carried)));
  return {
    compare: [...holderCompares(keys, j), cmp.modifiedAt(keys.task(j.next.taskId), j.taskModRevision)],
    success,
  };
}

/**
 * The owner, holding and task keys a finish writes, and its carried grant's: a txn of finishes must
 * write no key twice (etcd refuses it), and the carried grant's compares must see no key its finish
 * writes (its history keys are its task's own).
 */
export function finishKeys(keys: KeyLayout, j: FinishJob): string[] {
  const own = [keys.owner(j.resource), keys.holding(j.sessionId, j.requestId), keys.task(j.next.taskId)];
  const c = j.carried;
  return c === undefined
    ? own
    : [...own, keys.owner(c.task.resource), keys.holding(c.sessionId, c.requestId), keys.task(c.task.taskId)];
}

/** No two of `jobs`' finishes or carried grants write one key (and none a key of its own finish). */
export function distinctFinishes(keys: KeyLayout, jobs: readonly FinishJob[]): boolean {
  const seen = new Set<string>();
  for (const j of jobs) {
    for (const k of finishKeys(keys, j)) {
      if (seen.has(k)) return false;
      seen.add(k);
    }
  }
  return true;
}

/** A finish's outcome from its txn's result, with its carried grant's when it ran. */
function finishOutcomeOf(keys: KeyLayout, j: FinishJob, res: NestedResult, revision: bigint): LeaseOutcome {
  if (!res.succeeded) return { kind: 'notHolder' };
  if (j.carried === undefined) return { kind: 'done', revision };
  const grant = grantOutcomeOf(keys, j.carried, nestedResult(res, res.responses.length - 1), revision);
  const carried: GrantOutcome =
    grant.kind === 'granted' ? { kind: 'granted', token: grant.token, payloadJson: grant.payload } : grant;
  return { kind: 'done', revision, carried };
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
 *           carried (a completion's next acquire, issue 27): last, the grant's own txn
 *           (grantOwners' compares, success and failure ops, for another resource, task and
 *           request id), nested: so it is judged only when the finish's compares held, and the
 *           session never holds the new grant without having ended the old one (capacity)
 * failure:  nothing
 * shape:    one job: that txn. Several: a txn without compares whose success ops are one nested txn
 *           per job, judged on the store before the txn (see grantOwners), so a job whose holder
 *           lost the lease fails no other. A carried grant's compares are judged on the store
 *           before the txn too, as if it ran right after its finish: none of its keys is one the
 *           finish (or any other job of the txn) writes, which the store checks.
 * result:   per job, done{revision} (every done job at the txn's revision), or notHolder (a retry
 *           after a lost reply is recognised by the caller from the task record, e.g. its recorded
 *           result); a done job with a carried grant also carries the grant's outcome, as
 *           grantOwners tells it (granted at token = the txn's revision: the owner key it creates
 *           was absent, and the txn creates it)
 */
export async function finishAttempts(
  kv: Kv,
  keys: KeyLayout,
  jobs: readonly FinishJob[],
): Promise<readonly LeaseOutcome[]> {
  if (jobs.length === 0 || jobs.length > MAX_FINISHES_PER_TXN || !distinctFinishes(keys, jobs)) {
    throw new RangeError('finishAttempts takes 1 to MAX_FINISHES_PER_TXN jobs of distinct keys');
  }
  const carried = jobs.filter((j) => j.carried !== undefined);
  return kv.txnEach(
    { one: 'finishAttempt', many: 'finishAttempts' },
    jobs,
    (j) => finishSpec(keys, j),
    (j, res, revision) => finishOutcomeOf(keys, j, res, revision),
    // A finish reads nothing; a carried grant reads what a grant does.
    carried.length === 0
      ? undefined
      : { replyBytes: carried.reduce((n, j) => n + grantReplyBytes(j.carried as GrantJob), 0) },
  );
}
