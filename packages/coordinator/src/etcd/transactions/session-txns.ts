/**
 * Session transactions. A session is one etcd lease per connected worker incarnation; its key
 * `sessions/<sid>` says which coordinator serves it, and its mod_revision is the serving
 * coordinator's proof: every txn a coordinator runs for a session compares it, so a coordinator
 * that lost the session (a peer adopted it) can no longer act for it, even if it resumes late.
 */
import { encodeRecord, type SessionRecord } from '../../core/records.js';
import type { AdoptOutcome, CloseOutcome, EndArgs, EndOutcome } from '../../store/port.js';
import { ETCD_MAX_TXN_OPS } from './grant-txns.js';
import type { KeyLayout } from '../keys.js';
import { createOnLease } from './create-on-lease.js';
import type { Compare, KeyValue, Op } from '../backend.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';
import { endedOf, recordWriteOps } from '../record-ops.js';

/** What a session txn puts: the record of `sessions/<sessionId>`, on the session's lease. */
interface SessionPut {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly record: SessionRecord;
}

/**
 * createSession
 * keys:     sessions/<sid>
 * compares: sessions/<sid> absent (create_revision == 0)
 * success:  put sessions/<sid> = SessionRecord, attached to lease <leaseId>
 * failure:  nothing
 * result:   the txn revision (the session key's mod_revision, which the serving coordinator
 *           compares later), or undefined when the key already existed
 */
export async function createSession(kv: Kv, keys: KeyLayout, args: SessionPut): Promise<bigint | undefined> {
  return createOnLease(kv, 'createSession', {
    key: keys.session(args.sessionId),
    value: encodeRecord(args.record),
    leaseId: args.leaseId,
  });
}

/**
 * adoptSession — a worker resumed its session on this coordinator.
 * keys:     sessions/<sid>
 * compares: sessions/<sid> mod_revision == the revision just read (and checked by the caller: same
 *           worker id and incarnation, not ending)
 * success:  put sessions/<sid> = record with coordinatorId = this coordinator, same lease
 * failure:  nothing
 * result:   adopted{modRevision} — from now on only this coordinator may end the session; or
 *           raced (the key changed since it was read: read again)
 */
export async function adoptSession(
  kv: Kv,
  keys: KeyLayout,
  args: SessionPut & { readonly seenModRevision: bigint },
): Promise<AdoptOutcome> {
  const key = keys.session(args.sessionId);
  const res = await kv.txn('adoptSession', {
    compare: [cmp.modifiedAt(key, args.seenModRevision)],
    success: [op.put(key, encodeRecord(args.record), args.leaseId)],
  });
  return res.succeeded ? { kind: 'adopted', modRevision: res.revision } : { kind: 'raced' };
}

/**
 * endSession takes at most this many owner keys: 1 + n (+ 1) compares and n + 2 deletes must fit
 * etcd's `--max-txn-ops` (default 128). A session holding more ends with {@link closeSession} and
 * a lease revoke instead.
 */
export const MAX_END_SESSION_OWNERS = 120;

/**
 * How many lost attempts an endSession of `owners` owner keys may settle besides: each adds one
 * compare and at most three success ops (the settled record, its history entry, the entry it
 * pushes out), all within etcd's `--max-txn-ops`.
 */
export function maxEndSettlements(owners: number): number {
  return Math.max(0, Math.floor((ETCD_MAX_TXN_OPS - 2 - owners) / 3));
}

/**
 * Sessions one end txn takes at most (a nested txn each). etcd bounds a nested txn's lists by what
 * its parent left of `--max-txn-ops`: a batch of 16 leaves each 112, so a session whose longest
 * list is longer ({@link endOpsOf}) ends in a txn of its own.
 */
export const MAX_ENDS_PER_TXN = 16;

/** The longest op list of one session's end (compares, success or failure; see {@link endSession}). */
export function endOpsOf(args: EndArgs): number {
  const settle = args.settle?.length ?? 0;
  const compares = 1 + args.held.length + (args.knownUpTo === undefined ? 0 : 1) + settle;
  const success = args.held.length + 2 + 3 * settle;
  return Math.max(compares, success, 1);
}

/** True when `args` may share an end txn with others: a valid end whose lists fit a batch's nested budget. */
export function endNests(args: EndArgs): boolean {
  // An end the txn would refuse (endProblem) goes alone, so that it fails no other.
  return endOpsOf(args) <= ETCD_MAX_TXN_OPS - MAX_ENDS_PER_TXN && endProblem(args) === undefined;
}

/**
 * How {@link endSessions} calls split `batch` (indexes into it, in order): at most
 * {@link MAX_ENDS_PER_TXN} nesting sessions per call, no session or owner key twice in one; a
 * session that does not nest alone. An index that lagged could name an owner key under two
 * sessions, and both could settle its task: etcd refuses a request that puts a key twice (or puts
 * and deletes it) as a whole, which would fail every session of the txn. (Two deletes of one key it
 * allows; keeping owner keys apart keeps the settled task keys apart.)
 */
export function endBatches(batch: readonly EndArgs[]): number[][] {
  const groups: number[][] = [];
  let open: { members: number[]; names: Set<string> } | undefined;
  batch.forEach((args, i) => {
    if (!endNests(args)) {
      groups.push([i]);
      return;
    }
    const names = [`s:${args.sessionId}`, ...args.held.map((h) => `r:${h.resource}`)];
    if (open === undefined || open.members.length >= MAX_ENDS_PER_TXN || names.some((n) => open?.names.has(n))) {
      open = { members: [], names: new Set() };
      groups.push(open.members);
    }
    open.members.push(i);
    for (const n of names) open.names.add(n);
  });
  return groups;
}

/** Why `args` is not an end {@link endSession} takes (too many owners or settlements, a settlement of no held owner key). */
function endProblem(args: EndArgs): string | undefined {
  if (args.held.length > MAX_END_SESSION_OWNERS) {
    return `endSession takes at most ${MAX_END_SESSION_OWNERS} owner keys; use closeSession`;
  }
  const settle = args.settle ?? [];
  if (settle.length > maxEndSettlements(args.held.length)) {
    return `endSession of ${args.held.length} owner keys settles at most ${maxEndSettlements(args.held.length)} attempts`;
  }
  const heldTokens = new Map(args.held.map((h) => [h.resource, h.token]));
  const stray = settle.find((s) => s.legacy !== undefined || heldTokens.get(s.next.resource) !== s.token);
  return stray === undefined
    ? undefined
    : `endSession settles only the attempt of a held owner key (task ${stray.next.taskId})`;
}

function checkEnd(args: EndArgs): void {
  const problem = endProblem(args);
  if (problem !== undefined) throw new RangeError(problem);
}

/** One session's end: its compares, success and failure ops (see {@link endSession}). */
function endSpec(keys: KeyLayout, args: EndArgs): { compare: Compare[]; success: Op[]; failure: Op[] } {
  const settle = args.settle ?? [];
  const key = keys.session(args.sessionId);
  return {
    compare: [
      cmp.modifiedAt(key, args.knownModRevision),
      ...args.held.map((h) => cmp.createdAt(keys.owner(h.resource), h.token)),
      ...(args.knownUpTo === undefined
        ? []
        : [cmp.allCreatedBefore(keys.holdingsOf(args.sessionId), args.knownUpTo + 1n)]),
      ...settle.map((s) => cmp.modifiedAt(keys.task(s.next.taskId), s.token)),
    ],
    success: [
      ...args.held.map((h) => op.del(keys.owner(h.resource))),
      op.delPrefix(keys.holdingsOf(args.sessionId)),
      op.del(key),
      ...settle.flatMap((s) => recordWriteOps(keys, s, endedOf(s.prev))),
    ],
    failure: [op.get(key)],
  };
}

/** Why an end's compares failed, from its failure branch's read of the session key. */
function failedEnd(args: EndArgs, session: KeyValue | undefined): EndOutcome {
  if (session === undefined) return { kind: 'gone' };
  return session.modRevision === args.knownModRevision ? { kind: 'changed' } : { kind: 'moved' };
}

/**
 * endSession — the serving coordinator judged sessions expired; optionally it records the
 * attempts each end loses in the same txn (what settleLostAttempt would do next, one round trip
 * and one watch delivery later: until then the task is not grantable, so a takeover waits for it).
 * keys:     per session: sessions/<sid>, owners/<r> for every held r, holdings/<sid>/*; per
 *           settlement tasks/<t>, history/<t>#<n>, history/<t>#<n-10>
 * compares: per session: sessions/<sid> mod_revision == the one this coordinator knows (it still
 *           serves it); owners/<r> create_revision == token, for each holding read just before (or
 *           taken from the watch-fed index); with `knownUpTo` V (holdings taken from an index
 *           complete up to V): every holdings/<sid>/* create_revision < V + 1, so no holding the
 *           index has not seen can survive the delete (owner and holding keys are created and
 *           deleted together); per settlement tasks/<t> mod_revision == T, the token of a held owner
 *           key (the record the grant of T wrote: its attempt is open and nothing closed it), as
 *           settleLostAttempt compares — whose other compare (that owner key gone) this txn makes
 *           true itself
 * success:  per session: delete every owners/<r>, holdings/<sid>/* and sessions/<sid>; per
 *           settlement put tasks/<t> = the settled record and its history entry — all at one
 *           revision D (the caller revokes the lease afterwards)
 * failure:  per session: get sessions/<sid>
 * shape:    one session: that txn. Several (at most {@link MAX_ENDS_PER_TXN}, each {@link endNests}):
 *           a txn without compares whose success ops are one nested txn per session, each judged on
 *           the store before the txn (as grantOwners' jobs are), so a session whose compares fail
 *           (a peer adopted it, a grant landed) fails no other.
 * result:   per session, ended{revision D}; on failure: gone (the session key is absent: already
 *           ended), moved (another mod_revision: a peer adopted it), changed (same mod_revision:
 *           the holdings or a settled task changed, or the index lagged; read them again)
 */
export async function endSession(kv: Kv, keys: KeyLayout, args: EndArgs): Promise<EndOutcome> {
  const [outcome] = await endSessions(kv, keys, [args]);
  if (outcome === undefined) throw new RangeError('endSession: no outcome');
  return outcome;
}

/**
 * {@link endSession} of several sessions in one txn, one outcome each, in order: only ends that
 * {@link endBatches} would put in one txn (each nests; each session and owner key once).
 */
export async function endSessions(kv: Kv, keys: KeyLayout, batch: readonly EndArgs[]): Promise<EndOutcome[]> {
  const [only] = batch;
  if (batch.length === 1 && only !== undefined) checkEnd(only);
  // None or several: endBatches makes no group of none, puts an end that is refused or does not nest
  // in a txn of its own (and splits at a repeated session or owner key, or past MAX_ENDS_PER_TXN), so
  // one group means all may share.
  else if (endBatches(batch).length !== 1) {
    throw new RangeError(
      `endSessions takes 1..${MAX_ENDS_PER_TXN} valid ends that nest, each session and owner key once (endBatches)`,
    );
  }
  return kv.txnEach(
    { one: 'endSession', many: 'endSessions' },
    batch,
    (args) => endSpec(keys, args),
    (args, res, revision): EndOutcome =>
      res.succeeded ? { kind: 'ended', revision } : failedEnd(args, firstKv(res, 0)),
    // An end frees its session's tasks for their takeovers: never held back behind other txns.
    { urgent: true },
  );
}

/**
 * closeSession — the serving coordinator judged a session expired that holds more owner keys than
 * {@link endSession} can delete in one txn. The caller revokes the session's lease right after:
 * etcd then deletes every key attached to it (owner keys, holdings, the session key) at one
 * revision D, as endSession would have.
 * keys:     sessions/<sid>
 * compares: sessions/<sid> mod_revision == the one this coordinator knows (it still serves it)
 * success:  put sessions/<sid> = record with `ending: true` (same lease): its new mod_revision fails
 *           every grant txn of the session still in flight, and no coordinator adopts it any more
 * failure:  get sessions/<sid>
 * result:   closed{modRevision}; on failure: gone (absent: already ended) or moved (another
 *           mod_revision: a peer adopted it)
 */
export async function closeSession(
  kv: Kv,
  keys: KeyLayout,
  args: SessionPut & { readonly knownModRevision: bigint },
): Promise<CloseOutcome> {
  const key = keys.session(args.sessionId);
  const res = await kv.txn(
    'closeSession',
    {
      compare: [cmp.modifiedAt(key, args.knownModRevision)],
      success: [op.put(key, encodeRecord({ ...args.record, ending: true }), args.leaseId)],
      failure: [op.get(key)],
    },
    { urgent: true },
  );
  if (res.succeeded) return { kind: 'closed', modRevision: res.revision };
  return firstKv(res, 0) === undefined ? { kind: 'gone' } : { kind: 'moved' };
}
