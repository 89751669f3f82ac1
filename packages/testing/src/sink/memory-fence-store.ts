/**
 * The sink's storage port (`FenceStore` of `@leasehold/sink`) in memory: the sink's own pure
 * decisions (`decideBatch`) over maps instead of SQLite tables, each batch applied at once (one
 * synchronous step: atomic in a single-threaded process). Held to the sink's contract suite
 * (`memory-fence-store.test.ts`), the same suite SQLite and PostgreSQL pass.
 *
 * Not durable, by design: it is the write target of handler tests, not a sink to deploy.
 */
import {
  decideBatch,
  pageLength,
  resultJsonBytes,
  type BatchReader,
  type DecisionPageRows,
  type DecisionRow,
  type FenceOp,
  type FenceStore,
  type OpDecision,
  type ResourcePageRows,
  type ResultPageQuery,
  type StoredResultRow,
} from '@leasehold/sink';

export interface MemoryFenceStoreOptions {
  /** Wall clock (epoch ms) of the decision log and the results; default `Date.now`. */
  readonly nowMs?: () => number;
}

export class MemoryFenceStore implements FenceStore {
  readonly #nowMs: () => number;
  readonly #fences = new Map<string, bigint>();
  /** Per resource, its results in seq order. */
  readonly #results = new Map<string, StoredResultRow[]>();
  readonly #byId = new Map<string, Map<string, StoredResultRow>>();
  readonly #decisions: DecisionRow[] = [];
  readonly #reader: BatchReader;
  #resultSeq = 0n;
  #open = true;

  constructor(options: MemoryFenceStoreOptions = {}) {
    this.#nowMs = options.nowMs ?? Date.now;
    this.#reader = {
      fenceOf: (resource) => this.#fences.get(resource) ?? 0n,
      payloadOf: (resource, resultId) => this.#byId.get(resource)?.get(resultId)?.payload,
    };
  }

  applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    if (!this.#open) return Promise.reject(new Error('the memory fence store is closed'));
    if (ops.length === 0) return Promise.resolve([]);
    const plan = decideBatch(this.#reader, ops, this.#nowMs());
    const { fences, results, decisions } = plan.effects;
    for (const [resource, fence] of fences) this.#fences.set(resource, fence);
    for (const r of results) {
      this.#resultSeq += 1n;
      const row: StoredResultRow = { seq: this.#resultSeq, ...r };
      const list = this.#results.get(r.resource) ?? [];
      list.push(row);
      this.#results.set(r.resource, list);
      const byId = this.#byId.get(r.resource) ?? new Map<string, StoredResultRow>();
      byId.set(r.resultId, row);
      this.#byId.set(r.resource, byId);
    }
    for (const d of decisions) this.#decisions.push({ ...d, seq: this.#decisions.length + 1 });
    return Promise.resolve(plan.decisions);
  }

  fenceOf(resource: string): Promise<bigint> {
    return Promise.resolve(this.#reader.fenceOf(resource));
  }

  resourcePage(resource: string, query: ResultPageQuery): Promise<ResourcePageRows> {
    const candidates = (this.#results.get(resource) ?? []).filter((r) => r.seq > query.after).slice(0, query.limit + 1);
    const sizes = candidates.map((r) =>
      resultJsonBytes(resource.length, Buffer.byteLength(r.payload) + r.resultId.length + r.workerId.length),
    );
    const taken = pageLength(sizes, query);
    const results = candidates.slice(0, taken);
    return Promise.resolve({
      resource,
      fence: this.#reader.fenceOf(resource),
      results,
      next: results.at(-1)?.seq ?? query.after,
      hasMore: candidates.length > taken,
    });
  }

  resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined> {
    return Promise.resolve(this.#byId.get(resource)?.get(resultId));
  }

  decisions(after: number, limit: number): Promise<DecisionPageRows> {
    const decisions = this.#decisions.filter((d) => d.seq > after).slice(0, limit);
    return Promise.resolve({
      decisions,
      next: decisions.at(-1)?.seq ?? after,
      oldestRetained: this.#decisions.length === 0 ? 0 : 1,
    });
  }

  lastSeq(): Promise<number> {
    return Promise.resolve(this.#decisions.length);
  }

  isOpen(): boolean {
    return this.#open;
  }

  close(): Promise<void> {
    this.#open = false;
    return Promise.resolve();
  }
}
