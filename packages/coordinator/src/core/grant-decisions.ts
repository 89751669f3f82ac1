/**
 * The pure decisions of an acquire (the shell is `service/grants.ts`, which does the I/O in the
 * fixed order: grant txn, fence advance, then the reply): whether an acquire is admitted, how
 * long a long poll waits, whether a recorded grant may be replayed, and the frames it ends with.
 * Table-tested in grant-decisions.test.ts.
 */
import { formatToken, type CoordinatorMessage, type Grant, type JsonValue } from '@leasehold/protocol';
import { errorFrame } from './replies.js';

/** Candidates an acquire tries per round before it waits (each failed grant txn was a race). */
export const MAX_CANDIDATES = 4;

/**
 * A takeover: the task's last attempt was lost (its holder's session ended with the attempt open,
 * recorded as `expired`, or not recorded yet). Its grant and fence advance go in their own group
 * commits, not behind the ordinary ones in flight: a busy coordinator still hands an abandoned
 * resource over within one call of each kind.
 */
export function isTakeover(task: { readonly open?: unknown; readonly lastEvent?: string | undefined }): boolean {
  return task.open !== undefined || task.lastEvent === 'expired';
}

/** The request ids of a session's grants, asked one at a time (`SessionGrants`, or a Set in tests). */
export interface RequestIds {
  has(requestId: string): boolean;
}

/** What an acquire asks of its session's capacity. */
export interface CapacityView {
  /** Grants held: whether a request id made one of them. */
  readonly grantedRequestIds: RequestIds;
  readonly held: number;
  /** Acquires being served now. */
  readonly acquiring: number;
  /** What the hello declared. */
  readonly capacity: number;
}

/**
 * Capacity: held grants plus acquires being served stay within what the hello declared. A retry
 * of a request already granted is a replay, not a new grant: always admitted.
 */
export function admitAcquire(
  view: CapacityView,
  requestId: string,
): { readonly ok: true } | { readonly ok: false; readonly message: string } {
  if (view.grantedRequestIds.has(requestId)) return { ok: true };
  if (view.held + view.acquiring < view.capacity) return { ok: true };
  return {
    ok: false,
    message: `${view.held} grants held and ${view.acquiring} acquires in flight: capacity is ${view.capacity}`,
  };
}

/**
 * Whether an acquire that found nothing grantable must read its request's holding from etcd before
 * it waits or answers `lease.none`: the request may have been granted before, its grant reply lost,
 * and the retry must get that grant back. Not needed when every request of the session so far
 * arrived here, on its current connection, since the session was opened here (`requestsKnown`):
 * then a grant of this request id would be one of the session's grants this coordinator holds
 * (`grantedRequestIds`), and a request still being served is answered by that copy — unless a
 * grant txn of that request id failed without telling whether it was applied (`unsureRequestIds`:
 * a lost reply; it may hold a grant this coordinator never learnt of). A session resumed or adopted
 * (from a peer, or from this coordinator's own earlier connection) always reads.
 */
export function needsRequestRead(
  view: {
    readonly requestsKnown: boolean;
    readonly grantedRequestIds: RequestIds;
    readonly unsureRequestIds: RequestIds;
  },
  requestId: string,
): boolean {
  return !view.requestsKnown || view.grantedRequestIds.has(requestId) || view.unsureRequestIds.has(requestId);
}

/**
 * How long a long poll waits before it selects again, unless a change wakes it first: until its
 * own deadline (`leftMs`) or the session's (`sessionLeftMs`, + 1 so the end is seen), whichever is
 * first. A delayed task coming due is a change (the grant service's due timer), not a deadline here.
 */
export function pollDelayMs(leftMs: number, sessionLeftMs: number): number {
  return Math.min(leftMs, sessionLeftMs + 1);
}

/** A payload as `inputs/<t>` holds it (its JSON); undefined when missing or not JSON. */
export function parsePayloadJson(json: string | undefined): JsonValue | undefined {
  if (json === undefined) return undefined;
  try {
    return JSON.parse(json) as JsonValue;
  } catch {
    return undefined;
  }
}

/** What a replay of a recorded grant found in the store. */
export interface ReplayFacts<T> {
  /** The recorded grant's token (its holding's create_revision). */
  readonly recordedToken: bigint;
  readonly sessionId: string;
  /** The owner key of the grant's resource now. */
  readonly owner: { readonly token: bigint; readonly record: { readonly sessionId: string } } | undefined;
  readonly task: T | undefined;
  readonly payload: JsonValue | undefined;
}

/**
 * May the grant recorded for this request id be sent again? Only while it is still held by this
 * session (the owner key is the recorded token's and this session's); a live grant whose task or
 * payload is missing is a broken invariant.
 */
export function replayVerdict<T>(
  facts: ReplayFacts<T>,
):
  | { readonly ok: true; readonly task: T; readonly payload: JsonValue }
  | { readonly ok: false; readonly code: 'NOT_HOLDER' | 'INTERNAL' } {
  if (facts.owner?.token !== facts.recordedToken || facts.owner.record.sessionId !== facts.sessionId) {
    return { ok: false, code: 'NOT_HOLDER' };
  }
  if (facts.task === undefined || facts.payload === undefined) return { ok: false, code: 'INTERNAL' };
  return { ok: true, task: facts.task, payload: facts.payload };
}

/** Nothing grantable: try again after `retryAfterMs`. */
export function noLease(inReplyTo: string, requestId: string, retryAfterMs: number): CoordinatorMessage {
  return { type: 'lease.none', inReplyTo, requestId, retryAfterMs };
}

/**
 * The sink refused the fence advance (its fence is past the token): a fresh grant is abandoned
 * and the worker told there is nothing now; a replayed grant was superseded: NOT_HOLDER.
 */
export function advanceRefusedReply(
  fresh: boolean,
  msg: { readonly id: string; readonly requestId: string },
  fence: bigint,
  retryAfterMs: number,
): CoordinatorMessage {
  return fresh
    ? noLease(msg.id, msg.requestId, retryAfterMs)
    : errorFrame('NOT_HOLDER', 'the recorded grant was superseded at the sink', msg.id, { fence: formatToken(fence) });
}

/** The grant as the worker receives it (step (c), after the fence advance). */
export interface GrantedFacts {
  readonly inReplyTo: string;
  readonly requestId: string;
  readonly taskId: string;
  readonly resource: string;
  readonly token: bigint;
  readonly capability: string;
  /** Time left of the session: the lease's TTL as the worker should count it. */
  readonly sessionLeftMs: number;
  readonly payload: JsonValue;
  readonly attempt: number;
  readonly traceparent: string | undefined;
}

export function grantedMessage(facts: GrantedFacts): Grant {
  return {
    type: 'lease.granted',
    inReplyTo: facts.inReplyTo,
    requestId: facts.requestId,
    taskId: facts.taskId,
    resource: facts.resource,
    token: formatToken(facts.token),
    capability: facts.capability,
    ttlMs: Math.max(1, Math.floor(facts.sessionLeftMs)),
    payload: facts.payload,
    attempt: facts.attempt,
    ...(facts.traceparent === undefined ? {} : { traceparent: facts.traceparent }),
  };
}

/**
 * Where one acquire's time went, in seconds: wait is the long poll (from the request to the moment
 * a grantable task was found, after the last wake-up); work is the rest, up to the grant.
 */
export function grantTiming(
  receivedAtMs: number,
  workStartMs: number | undefined,
  nowMs: number,
): { readonly waitSeconds: number; readonly workSeconds: number } {
  const start = workStartMs ?? nowMs;
  return { waitSeconds: Math.max(0, start - receivedAtMs) / 1_000, workSeconds: Math.max(0, nowMs - start) / 1_000 };
}
