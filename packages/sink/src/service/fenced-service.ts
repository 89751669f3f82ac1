/**
 * The fenced write service, in process: the sink without HTTP. Embedders (and the HTTP routes) call
 * it with parsed, already-authenticated input; it queues each request for group commit and answers
 * with the protocol's decision types once the commit is durable.
 *
 * Authentication is the caller's job: the HTTP layer checks the coordinator key for advances and
 * the capability for writes before calling in. An embedder is trusted like the coordinator.
 */
import {
  canonicalJson,
  RESOURCE_PAGE_MAX_RESULTS,
  type AdvanceDecision,
  type JsonValue,
  type WriteDecision,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { FenceOp, OpDecision } from '../core/ops.js';
import { LeaseholdError } from '../errors.js';
import type { SinkMetrics } from '../metrics.js';
import {
  DECISION_PAGE_ENVELOPE_BYTES,
  RESULT_PAGE_ENVELOPE_BYTES,
  decisionJsonBytes,
  pageLength,
} from '../core/page.js';
import type { DecisionPageRows, FenceStore, ResourcePageRows, StoredResultRow } from '../store/port.js';
import { GroupCommitter } from './group-committer.js';

export interface AdvanceInput {
  readonly resource: string;
  readonly token: bigint;
}

export interface WriteInput {
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
  readonly workerId: string;
  readonly payload: JsonValue;
  /** `canonicalJson(payload)` when the caller already has it. */
  readonly canonicalPayload?: string;
}

export interface FencedServiceOptions {
  readonly store: FenceStore;
  readonly logger: Logger;
  readonly metrics?: SinkMetrics | undefined;
  readonly maxBatchOps?: number | undefined;
  /**
   * Byte budget of one read page (a resource's results, the decision log), envelope included;
   * a single entry larger than it still comes alone. Default {@link DEFAULT_READ_PAGE_MAX_BYTES}.
   */
  readonly readPageMaxBytes?: number | undefined;
}

/** 4 MiB: four results of the default 1 MiB body limit per page, and at most that buffered per read. */
export const DEFAULT_READ_PAGE_MAX_BYTES = 4 * 1024 * 1024;

export interface ResourcePageInput {
  /** Results after this cursor (a previous page's `next`); 0n or absent: from the first. */
  readonly after?: bigint | undefined;
  /** At most this many results, 0..1000 (default 1000). */
  readonly limit?: number | undefined;
}

export class FencedService {
  readonly store: FenceStore;
  readonly #committer: GroupCommitter;
  readonly #metrics: SinkMetrics | undefined;
  readonly #log: Logger;
  readonly #commitListeners = new Set<() => void>();
  readonly #pageMaxBytes: number;

  constructor(options: FencedServiceOptions) {
    this.store = options.store;
    this.#pageMaxBytes = options.readPageMaxBytes ?? DEFAULT_READ_PAGE_MAX_BYTES;
    this.#metrics = options.metrics;
    this.#log = options.logger;
    this.#committer = new GroupCommitter({
      ...options,
      onCommitted: () => {
        for (const listener of this.#commitListeners) listener();
      },
    });
  }

  /**
   * Call `listener` after every durable commit of this service (new decision-log entries exist).
   * In process only: commits of other processes on a shared database are not seen. Returns `off`.
   */
  onCommit(listener: () => void): () => void {
    this.#commitListeners.add(listener);
    return () => {
      this.#commitListeners.delete(listener);
    };
  }

  /** True once {@link close} was called: new requests are refused with SHUTTING_DOWN. */
  get closing(): boolean {
    return this.#committer.closing;
  }

  async advance(input: AdvanceInput): Promise<AdvanceDecision> {
    const [decision] = await this.advanceBatch([input]);
    if (decision === undefined) throw new LeaseholdError('INTERNAL', 'store returned no decision');
    return decision;
  }

  /** Many advances in one durable commit; one decision per item, in order. */
  async advanceBatch(items: readonly AdvanceInput[]): Promise<AdvanceDecision[]> {
    const ops: FenceOp[] = items.map((i) => ({ kind: 'advance', resource: i.resource, token: i.token }));
    const decisions = await this.#submit(ops);
    return decisions.map((decision, at) => {
      const item = ops[at];
      if (!isAdvanceDecision(decision) || item === undefined) {
        throw new LeaseholdError('INTERNAL', 'store returned a write decision for an advance');
      }
      this.#metrics?.advances.inc({ outcome: decision.ok ? decision.outcome : decision.code.toLowerCase() });
      if (!decision.ok) {
        this.#log.warn(
          { resource: item.resource, token: String(item.token), fence: String(decision.fence) },
          'stale advance refused',
        );
      }
      return decision;
    });
  }

  async write(input: WriteInput): Promise<WriteDecision> {
    const op: FenceOp = {
      kind: 'write',
      resource: input.resource,
      token: input.token,
      resultId: input.resultId,
      workerId: input.workerId,
      payload: input.canonicalPayload ?? canonicalJson(input.payload),
    };
    const [decision] = await this.#submit([op]);
    if (decision === undefined || !isWriteDecision(decision)) {
      throw new LeaseholdError('INTERNAL', 'store returned no write decision for a write');
    }
    this.#metrics?.writes.inc({ outcome: decision.ok ? decision.outcome : decision.code.toLowerCase() });
    if (!decision.ok) {
      this.#log.warn(
        {
          resource: input.resource,
          token: String(input.token),
          resultId: input.resultId,
          code: decision.code,
          fence: String(decision.fence),
        },
        'write refused',
      );
    }
    return decision;
  }

  /**
   * One page of a resource's results in the order they were stored, with the fence: at most
   * `limit` results within the read page budget (shorter when results are large; one larger than
   * the budget comes alone). Walk with `after = page.next` while `page.hasMore`.
   */
  resourcePage(resource: string, input: ResourcePageInput = {}): Promise<ResourcePageRows> {
    const limit = input.limit ?? RESOURCE_PAGE_MAX_RESULTS;
    if (!Number.isInteger(limit) || limit < 0 || limit > RESOURCE_PAGE_MAX_RESULTS) {
      throw new LeaseholdError('INVALID_MESSAGE', `limit must be 0..${RESOURCE_PAGE_MAX_RESULTS}`);
    }
    const after = input.after ?? 0n;
    if (after < 0n) throw new LeaseholdError('INVALID_MESSAGE', 'after must be a cursor from a previous page, or 0');
    return this.store.resourcePage(resource, {
      after,
      limit,
      maxBytes: Math.max(0, this.#pageMaxBytes - RESULT_PAGE_ENVELOPE_BYTES),
    });
  }

  result(resource: string, resultId: string): Promise<StoredResultRow | undefined> {
    return this.store.resultOf(resource, resultId);
  }

  /** Decisions with seq > `after`, oldest first, at most `limit` (the event feed's reads). */
  decisions(after: number, limit: number): Promise<DecisionPageRows> {
    return this.store.decisions(after, limit);
  }

  /**
   * A page of the decision log for a reader (`GET /v1/decisions`): like {@link decisions}, and
   * within the read page budget too (shorter if entries with long ids would pass it).
   */
  async decisionPage(after: number, limit: number): Promise<DecisionPageRows> {
    const page = await this.store.decisions(after, limit);
    const sizes = page.decisions.map((d) =>
      decisionJsonBytes(d.resource.length + (d.resultId?.length ?? 0) + (d.workerId?.length ?? 0)),
    );
    const taken = pageLength(sizes, { limit, maxBytes: this.#pageMaxBytes - DECISION_PAGE_ENVELOPE_BYTES });
    if (taken === page.decisions.length) return page;
    const decisions = page.decisions.slice(0, taken);
    return { ...page, decisions, next: decisions.at(-1)?.seq ?? after };
  }

  lastSeq(): Promise<number> {
    return this.store.lastSeq();
  }

  /** Refuse new work and wait for the queued and in-flight batches to commit. Does not close the store. */
  close(): Promise<void> {
    return this.#committer.close();
  }

  #submit(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    return this.#committer.submit(ops);
  }
}

function isAdvanceDecision(decision: OpDecision): decision is AdvanceDecision {
  return decision.ok
    ? decision.outcome === 'advanced' || decision.outcome === 'unchanged'
    : decision.code === 'STALE_TOKEN';
}

function isWriteDecision(decision: OpDecision): decision is WriteDecision {
  return decision.ok ? decision.outcome === 'written' || decision.outcome === 'replayed' : true;
}
