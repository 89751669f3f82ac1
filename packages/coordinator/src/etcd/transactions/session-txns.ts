/**
 * Session transactions. A session is one etcd lease per connected worker incarnation; its key
 * `sessions/<sid>` says which coordinator serves it, and its mod_revision is the serving
 * coordinator's proof: every txn a coordinator runs for a session compares it, so a coordinator
 * that lost the session (a peer adopted it) can no longer act for it, even if it resumes late.
 */
import type { IKeyValue } from 'etcd3';
import { encodeRecord, type SessionRecord } from '../../core/records.js';
import type { KeyLayout } from '../keys.js';
import { cmp, firstKv, op, type Kv } from '../kv.js';

export type SessionWriteResult =
  { readonly ok: true; readonly modRevision: bigint } | { readonly ok: false; readonly current: IKeyValue | undefined };

/**
 * createSession
 * keys:     sessions/<sid>
 * compares: sessions/<sid> absent (create_revision == 0)
 * success:  put sessions/<sid> = SessionRecord, attached to lease <leaseId>
 * failure:  get sessions/<sid>
 * result:   { ok, modRevision = txn revision } — the revision the serving coordinator compares later
 */
export async function createSession(
  kv: Kv,
  keys: KeyLayout,
  args: { readonly sessionId: string; readonly leaseId: string; readonly record: SessionRecord },
): Promise<SessionWriteResult> {
  const key = keys.session(args.sessionId);
  const res = await kv.txn('createSession', {
    compare: [cmp.absent(key)],
    success: [op.put(key, encodeRecord(args.record), args.leaseId)],
    failure: [op.get(key)],
  });
  return res.succeeded ? { ok: true, modRevision: res.revision } : { ok: false, current: firstKv(res, 0) };
}

/**
 * adoptSession — a worker resumed its session on this coordinator.
 * keys:     sessions/<sid>
 * compares: sessions/<sid> mod_revision == the revision just read (and checked: same worker id and
 *           incarnation)
 * success:  put sessions/<sid> = record with coordinatorId = this coordinator, same lease
 * failure:  get sessions/<sid>
 * result:   { ok, modRevision } — from now on only this coordinator may end the session
 */
export async function adoptSession(
  kv: Kv,
  keys: KeyLayout,
  args: {
    readonly sessionId: string;
    readonly leaseId: string;
    readonly seenModRevision: bigint;
    readonly record: SessionRecord;
  },
): Promise<SessionWriteResult> {
  return rewriteSession(kv, keys, 'adoptSession', args.seenModRevision, args);
}

/** adoptSession and closeSession: compare the session key's mod_revision, rewrite it on its lease. */
async function rewriteSession(
  kv: Kv,
  keys: KeyLayout,
  name: string,
  expectedModRevision: bigint,
  args: { readonly sessionId: string; readonly leaseId: string; readonly record: SessionRecord },
): Promise<SessionWriteResult> {
  const key = keys.session(args.sessionId);
  const res = await kv.txn(name, {
    compare: [cmp.modifiedAt(key, expectedModRevision)],
    success: [op.put(key, encodeRecord(args.record), args.leaseId)],
    failure: [op.get(key)],
  });
  return res.succeeded ? { ok: true, modRevision: res.revision } : { ok: false, current: firstKv(res, 0) };
}

export interface HeldOwner {
  readonly resource: string;
  readonly token: bigint;
}

/**
 * endSession takes at most this many owner keys: 1 + n (+ 1) compares and n + 2 deletes must fit
 * etcd's `--max-txn-ops` (default 128). A session holding more ends with {@link closeSession} and
 * a lease revoke instead.
 */
export const MAX_END_SESSION_OWNERS = 120;

export type EndSessionResult =
  { readonly ok: true; readonly revision: bigint } | { readonly ok: false; readonly current: IKeyValue | undefined };

/**
 * endSession — the serving coordinator judged the session expired.
 * keys:     sessions/<sid>, owners/<r> for every held r, holdings/<sid>/*
 * compares: sessions/<sid> mod_revision == the one this coordinator knows (it still serves it);
 *           owners/<r> create_revision == token, for each holding read just before (or taken from
 *           the watch-fed index); with `knownUpTo` V (holdings taken from an index complete up to
 *           V): every holdings/<sid>/* create_revision < V + 1, so no holding the index has not
 *           seen can survive the delete (owner and holding keys are created and deleted together)
 * success:  delete every owners/<r>, holdings/<sid>/* and sessions/<sid> — all
 *           at one revision D (the caller revokes the lease afterwards)
 * failure:  get sessions/<sid> (absent: already ended; other mod_revision: a peer adopted it;
 *           same: the holdings changed or the index lagged, read again)
 * result:   { ok, revision D }
 */
export async function endSession(
  kv: Kv,
  keys: KeyLayout,
  args: {
    readonly sessionId: string;
    readonly knownModRevision: bigint;
    readonly held: readonly HeldOwner[];
    readonly knownUpTo?: bigint;
  },
): Promise<EndSessionResult> {
  if (args.held.length > MAX_END_SESSION_OWNERS) {
    throw new RangeError(`endSession takes at most ${MAX_END_SESSION_OWNERS} owner keys; use closeSession`);
  }
  const key = keys.session(args.sessionId);
  const res = await kv.txn('endSession', {
    compare: [
      cmp.modifiedAt(key, args.knownModRevision),
      ...args.held.map((h) => cmp.createdAt(keys.owner(h.resource), h.token)),
      ...(args.knownUpTo === undefined
        ? []
        : [cmp.allCreatedBefore(keys.holdingsOf(args.sessionId), args.knownUpTo + 1n)]),
    ],
    success: [
      ...args.held.map((h) => op.del(keys.owner(h.resource))),
      op.delPrefix(keys.holdingsOf(args.sessionId)),
      op.del(key),
    ],
    failure: [op.get(key)],
  });
  return res.succeeded ? { ok: true, revision: res.revision } : { ok: false, current: firstKv(res, 0) };
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
 * failure:  get sessions/<sid> (absent: already ended; other mod_revision: a peer adopted it)
 * result:   { ok, modRevision }
 */
export async function closeSession(
  kv: Kv,
  keys: KeyLayout,
  args: {
    readonly sessionId: string;
    readonly leaseId: string;
    readonly knownModRevision: bigint;
    readonly record: SessionRecord;
  },
): Promise<SessionWriteResult> {
  return rewriteSession(kv, keys, 'closeSession', args.knownModRevision, {
    ...args,
    record: { ...args.record, ending: true },
  });
}
