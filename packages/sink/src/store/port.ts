/**
 * The storage port of the sink. The SQLite store implements it today; a PostgreSQL store can follow
 * and must pass the same contract suite (src/contract.ts).
 *
 * Contract:
 * - `applyBatch` decides the ops with `decideBatch` (src/core) over the committed state and applies
 *   the effects (fences, results, decision log) in ONE atomic transaction. It resolves only after
 *   the commit is durable (for SQLite with synchronous=FULL: fsynced). If it rejects, nothing of
 *   the batch is visible.
 * - A fence never decreases, a stored result never changes, the decision log is append-only
 *   (except retention pruning of its oldest entries) and its sequence numbers never repeat.
 */
import type { DecisionRecord, FenceOp, OpDecision } from '../core/ops.js';

export interface StoredResultRow {
  readonly resource: string;
  readonly resultId: string;
  readonly token: bigint;
  readonly workerId: string;
  /** Canonical JSON. */
  readonly payload: string;
  readonly writtenAtMs: number;
}

export interface DecisionRow extends DecisionRecord {
  readonly seq: number;
}

export interface DecisionPageRows {
  readonly decisions: readonly DecisionRow[];
  /** Cursor for the next page: the last returned seq, or `after` when nothing new. */
  readonly next: number;
  /** Lowest seq still retained (0 when the log is empty). */
  readonly oldestRetained: number;
}

export interface ResourceRows {
  readonly resource: string;
  readonly fence: bigint;
  readonly results: readonly StoredResultRow[];
}

export interface FenceStore {
  /** Decide `ops` in arrival order and commit their effects atomically and durably. */
  applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]>;
  fenceOf(resource: string): Promise<bigint>;
  /** Fence and results of a resource (fence 0 and no results if never seen). */
  resourceOf(resource: string): Promise<ResourceRows>;
  resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined>;
  /** Decisions with seq > `after`, oldest first, at most `limit`. */
  decisions(after: number, limit: number): Promise<DecisionPageRows>;
  /** Highest seq in the decision log (0 when it is empty): where a reader "from now" starts. */
  lastSeq(): Promise<number>;
  /** True while the store can take work. */
  isOpen(): boolean;
  close(): Promise<void>;
}
