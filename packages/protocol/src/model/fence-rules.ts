/**
 * The write target's rules, as pure decisions. Every store (the in-memory model, the SQLite sink,
 * a future PostgreSQL sink) applies exactly these inside its own atomic step.
 *
 * - advance: the fence only grows. token > fence: advanced; token == fence: unchanged (an idempotent
 *   retry); token < fence: STALE_TOKEN.
 * - write: accepted only if token == fence. Then: result id absent -> written; same payload ->
 *   replayed; different payload -> RESULT_CONFLICT. token < fence -> STALE_TOKEN (a newer holder
 *   exists); token > fence -> FENCE_CONFLICT (the token was never advanced here, so it was not
 *   issued by a grant: a worker-supplied "bigger number" is refused).
 */
import type { JsonValue } from '../canonical-json.js';

export type AdvanceDecision =
  | { readonly ok: true; readonly outcome: 'advanced' | 'unchanged'; readonly fence: bigint }
  | { readonly ok: false; readonly code: 'STALE_TOKEN'; readonly fence: bigint };

export type WriteDecision =
  | { readonly ok: true; readonly outcome: 'written' | 'replayed'; readonly fence: bigint }
  | { readonly ok: false; readonly code: 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT'; readonly fence: bigint };

/**
 * The outcome of a fenced transaction (`fencedTransaction` of @leasehold/fence-pg, and the worker's
 * `ctx.fencedTransaction`): the write decision, with what the transaction answered.
 */
export type FencedTransactionOutcome<T> =
  /** Committed: the callback's writes, its result (under resultId, if given) and the decision. */
  | { readonly ok: true; readonly outcome: 'written'; readonly fence: bigint; readonly result: T }
  /** A result was already stored under resultId with the same canonical JSON; this call's writes were rolled back. */
  | { readonly ok: true; readonly outcome: 'replayed'; readonly fence: bigint; readonly result: JsonValue }
  /** Refused; nothing of the callback was committed. */
  | Extract<WriteDecision, { readonly ok: false }>;

/** `fence` is 0n for a resource never advanced. */
export function decideAdvance(fence: bigint, token: bigint): AdvanceDecision {
  if (token > fence) return { ok: true, outcome: 'advanced', fence: token };
  if (token === fence) return { ok: true, outcome: 'unchanged', fence };
  return { ok: false, code: 'STALE_TOKEN', fence };
}

/**
 * @param existingPayload canonical payload already stored under this (resource, result id), if any.
 * @param payload canonical payload of this write.
 */
export function decideWrite(
  fence: bigint,
  token: bigint,
  existingPayload: string | undefined,
  payload: string,
): WriteDecision {
  if (token < fence) return { ok: false, code: 'STALE_TOKEN', fence };
  if (token > fence) return { ok: false, code: 'FENCE_CONFLICT', fence };
  if (existingPayload === undefined) return { ok: true, outcome: 'written', fence };
  if (existingPayload === payload) return { ok: true, outcome: 'replayed', fence };
  return { ok: false, code: 'RESULT_CONFLICT', fence };
}
