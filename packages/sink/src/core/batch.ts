/**
 * Group-commit decisions, pure.
 *
 * A batch is a list of ops that arrived together and will be committed in one transaction. Each op
 * must get exactly the answer it would get if the ops ran one at a time in arrival order, so the
 * batch is decided over an *overlay*: the state read from the store (inside the transaction) plus
 * the effects of the earlier ops of the same batch. Two writes of one (resource, result id) in one
 * batch therefore see each other: the first is `written`, an identical second is `replayed`, a
 * different second is `RESULT_CONFLICT`; a write after an advance of the same batch sees the new fence.
 *
 * The rules themselves are `decideAdvance` / `decideWrite` from @leasehold/protocol, unchanged.
 */
import { decideAdvance, decideWrite } from '@leasehold/protocol';
import type { AdvanceOp, BatchPlan, DecisionRecord, FenceOp, NewResult, OpDecision, WriteOp } from './ops.js';
import { outcomeOf } from './ops.js';

/** Reads committed state. Called only inside the batch's transaction, at most once per key. */
export interface BatchReader {
  /** Fence of `resource`, 0n if never advanced. */
  fenceOf(resource: string): bigint;
  /** Canonical payload stored under (resource, resultId), if any. */
  payloadOf(resource: string, resultId: string): string | undefined;
}

const MISSING = Symbol('missing');

/** Committed state plus the effects of the batch so far. Each key is read from the store at most once. */
class Overlay {
  readonly #reader: BatchReader;
  readonly #fences = new Map<string, bigint>();
  readonly #grown = new Map<string, bigint>();
  readonly #payloads = new Map<string, Map<string, string | typeof MISSING>>();

  constructor(reader: BatchReader) {
    this.#reader = reader;
  }

  fenceOf(resource: string): bigint {
    let fence = this.#fences.get(resource);
    if (fence === undefined) {
      fence = this.#reader.fenceOf(resource);
      this.#fences.set(resource, fence);
    }
    return fence;
  }

  setFence(resource: string, fence: bigint): void {
    this.#fences.set(resource, fence);
    this.#grown.set(resource, fence);
  }

  payloadOf(resource: string, resultId: string): string | undefined {
    let byId = this.#payloads.get(resource);
    if (byId === undefined) {
      byId = new Map();
      this.#payloads.set(resource, byId);
    }
    let payload = byId.get(resultId);
    if (payload === undefined) {
      payload = this.#reader.payloadOf(resource, resultId) ?? MISSING;
      byId.set(resultId, payload);
    }
    return payload === MISSING ? undefined : payload;
  }

  setPayload(resource: string, resultId: string, payload: string): void {
    this.payloadOf(resource, resultId);
    this.#payloads.get(resource)?.set(resultId, payload);
  }

  grownFences(): ReadonlyMap<string, bigint> {
    return this.#grown;
  }
}

/**
 * The rule a batch judges writes by: the fence a write is decided against. Production (and the
 * default everywhere) is {@link FENCED}: the resource's fence before the write, so only a write
 * carrying the current token lands. An ordinary dependency-injection seam (`SinkDeps.rules`,
 * the stores' `rules` option) so an embedding or a test entry point can run the real sink with
 * another rule; the decision log always records the true fence before each op.
 */
export interface BatchRules {
  readonly writeFence: (op: WriteOp, fenceBefore: bigint) => bigint;
}

/** The fence rule of the design note: a write is judged against the resource's current fence. */
export const FENCED: BatchRules = Object.freeze({ writeFence: (_op: WriteOp, fenceBefore: bigint) => fenceBefore });

/**
 * Decide `ops` in order over `reader`'s state under `rules` (default {@link FENCED}). Returns one
 * decision per op and the effects the store must apply (in the same transaction) to make them durable.
 */
export function decideBatch(
  reader: BatchReader,
  ops: readonly FenceOp[],
  atMs: number,
  rules: BatchRules = FENCED,
): BatchPlan {
  const overlay = new Overlay(reader);
  const decisions: OpDecision[] = [];
  const records: DecisionRecord[] = [];
  const results: NewResult[] = [];
  for (const op of ops) {
    const fenceBefore = overlay.fenceOf(op.resource);
    const decision =
      op.kind === 'advance'
        ? applyAdvance(overlay, op, fenceBefore)
        : applyWrite(overlay, op, rules.writeFence(op, fenceBefore), atMs, results);
    decisions.push(decision);
    records.push({
      kind: op.kind,
      resource: op.resource,
      token: op.token,
      fenceBefore,
      outcome: outcomeOf(decision),
      resultId: op.kind === 'write' ? op.resultId : undefined,
      workerId: op.kind === 'write' ? op.workerId : undefined,
      atMs,
    });
  }
  return { decisions, effects: { fences: overlay.grownFences(), results, decisions: records } };
}

function applyAdvance(overlay: Overlay, op: AdvanceOp, fence: bigint): OpDecision {
  const decision = decideAdvance(fence, op.token);
  if (decision.ok && decision.outcome === 'advanced') overlay.setFence(op.resource, decision.fence);
  return decision;
}

function applyWrite(overlay: Overlay, op: WriteOp, fence: bigint, atMs: number, results: NewResult[]): OpDecision {
  // Only a write whose token matches the fence needs the stored payload: skip the read otherwise.
  const existing = op.token === fence ? overlay.payloadOf(op.resource, op.resultId) : undefined;
  const decision = decideWrite(fence, op.token, existing, op.payload);
  if (decision.ok && decision.outcome === 'written') {
    overlay.setPayload(op.resource, op.resultId, op.payload);
    results.push({
      resource: op.resource,
      resultId: op.resultId,
      token: op.token,
      workerId: op.workerId,
      payload: op.payload,
      writtenAtMs: atMs,
    });
  }
  return decision;
}
