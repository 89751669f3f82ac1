/**
 * The operations a sink decides, and what each decision records. Pure types: no I/O.
 *
 * Tokens are `bigint` (etcd revisions, int64); payloads are already canonical JSON strings
 * (`canonicalJson` from @leasehold/protocol), so "same payload" is plain string equality.
 */
import type { AdvanceDecision, WriteDecision } from '@leasehold/protocol';

export interface AdvanceOp {
  readonly kind: 'advance';
  readonly resource: string;
  readonly token: bigint;
}

export interface WriteOp {
  readonly kind: 'write';
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
  readonly workerId: string;
  /** Canonical JSON of the payload. */
  readonly payload: string;
}

export type FenceOp = AdvanceOp | WriteOp;

/** The decision for an op: an {@link AdvanceDecision} for an advance, a {@link WriteDecision} for a write. */
export type OpDecision = AdvanceDecision | WriteDecision;

export type DecisionOutcome =
  'advanced' | 'unchanged' | 'written' | 'replayed' | 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT';

/** One entry of the decision log, before the store gives it a sequence number. */
export interface DecisionRecord {
  readonly kind: 'advance' | 'write';
  readonly resource: string;
  readonly token: bigint;
  /** The fence when the decision was taken (before an advance took effect). */
  readonly fenceBefore: bigint;
  readonly outcome: DecisionOutcome;
  readonly resultId: string | undefined;
  readonly workerId: string | undefined;
  readonly atMs: number;
}

/** A result row to insert (only for `written` decisions). */
export interface NewResult {
  readonly resource: string;
  readonly resultId: string;
  readonly token: bigint;
  readonly workerId: string;
  /** Canonical JSON. */
  readonly payload: string;
  readonly writtenAtMs: number;
}

/** Everything one batch changes, to be applied by the store inside the batch's transaction. */
export interface BatchEffects {
  /** Final fence of every resource whose fence grew in this batch. */
  readonly fences: ReadonlyMap<string, bigint>;
  /** New results, in decision order. */
  readonly results: readonly NewResult[];
  /** Every decision, in arrival order. */
  readonly decisions: readonly DecisionRecord[];
}

export interface BatchPlan {
  /** `decisions[i]` answers `ops[i]`. */
  readonly decisions: readonly OpDecision[];
  readonly effects: BatchEffects;
}

/** The decision's outcome as logged: the success outcome, or the refusal code. */
export function outcomeOf(decision: OpDecision): DecisionOutcome {
  return decision.ok ? decision.outcome : decision.code;
}
