/**
 * The storage port of the sink, implemented by the SQLite and the PostgreSQL stores; both pass the
 * same contract suite (src/testing/contract.ts).
 *
 * Contract:
 * - `applyBatch` decides the ops with `decideBatch` (src/core) over the committed state and applies
 *   the effects (fences, results, decision log) in ONE atomic transaction. It resolves only after
 *   the commit is durable (for SQLite with synchronous=FULL: fsynced). If it rejects, nothing of
 *   the batch is visible.
 * - A fence never decreases, a stored result never changes, the decision log is append-only
 *   (except retention pruning of its oldest entries) and its sequence numbers never repeat.
 * - Every stored result has a `seq`, allocated when it is stored, never reused, and, per resource,
 *   in commit order: a reader paging a resource by `seq > after` never misses a result committed
 *   after a page it read. `resourcePage` is bounded by count and bytes (src/core/page.ts) and reads
 *   no payload it does not return.
 */
import type { DecisionRecord, FenceOp, NewResult, OpDecision } from '../core/ops.js';

/** A stored result: the row its batch inserted, with the seq it was stored under. */
export interface StoredResultRow extends NewResult {
  /** Position in the resource's append order (the page cursor). */
  readonly seq: bigint;
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

export interface ResultPageQuery {
  /** Results with seq > after (0n: from the first). */
  readonly after: bigint;
  /** At most this many results (0: none, only the fence and `hasMore`). */
  readonly limit: number;
  /** Their JSON (resultJsonBytes) adds up to at most this, except that a first result always comes. */
  readonly maxBytes: number;
}

export interface ResourcePageRows {
  readonly resource: string;
  /** The fence as this page was read (0 if never advanced). */
  readonly fence: bigint;
  readonly results: readonly StoredResultRow[];
  /** The last returned seq, or `after` when the page is empty. */
  readonly next: bigint;
  /** More results existed after `next` when the page was read. */
  readonly hasMore: boolean;
}

export interface FenceStore {
  /** Decide `ops` in arrival order and commit their effects atomically and durably. */
  applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]>;
  fenceOf(resource: string): Promise<bigint>;
  /** The fence and one page of a resource's results in seq order (fence 0, no results if never seen). */
  resourcePage(resource: string, query: ResultPageQuery): Promise<ResourcePageRows>;
  resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined>;
  /** Decisions with seq > `after`, oldest first, at most `limit`. */
  decisions(after: number, limit: number): Promise<DecisionPageRows>;
  /** Highest seq in the decision log (0 when it is empty): where a reader "from now" starts. */
  lastSeq(): Promise<number>;
  /** True while the store can take work. */
  isOpen(): boolean;
  close(): Promise<void>;
}
