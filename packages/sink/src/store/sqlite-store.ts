/**
 * The SQLite implementation of {@link FenceStore}, on better-sqlite3 (synchronous, embedded).
 *
 * Durability: WAL journal with `synchronous=FULL` by default, so a committed batch is fsynced before
 * `applyBatch` resolves and survives a process or machine crash. `NORMAL` trades the last commits on
 * power loss (not on a process crash) for speed; it is an explicit opt-in.
 *
 * A page of a resource's results (`resourcePage`) is one deferred read transaction: the sizes of
 * the next `limit + 1` results by `(resource, seq)` (`octet_length` reads a payload's length from
 * its record header, not the payload), `pageLength` (src/core), then the fence and only the rows
 * the page takes.
 *
 * One batch = one `BEGIN IMMEDIATE` transaction:
 *   reads   fences(resource), results(resource, result_id) for the keys the batch touches
 *   decides decideBatch (src/core) over those reads plus the batch's own earlier effects
 *   writes  fences upsert (guarded: only ever grows), results insert, one decisions row per op,
 *           and prunes decisions older than the retention window
 *   result  one decision per op, in arrival order; on any error the whole batch rolls back
 */
import Database from 'better-sqlite3';
import { decideBatch, FENCED, type BatchReader, type BatchRules } from '../core/batch.js';
import type { FenceOp, OpDecision } from '../core/ops.js';
import { pageLength, resultJsonBytes } from '../core/page.js';
import { decisionFromRow, resultFromRow, type DecisionDbRow, type ResultDbRow } from './db-rows.js';
import { migrate } from './migrations.js';
import type { DecisionPageRows, FenceStore, ResourcePageRows, ResultPageQuery, StoredResultRow } from './port.js';

export interface SqliteStoreOptions {
  /** File path, or ':memory:' for tests. */
  readonly path: string;
  readonly synchronous?: 'FULL' | 'NORMAL';
  /** Keep at least this many newest decisions; 0 keeps all. */
  readonly decisionRetention?: number;
  readonly nowMs?: () => number;
  /** The rule writes are judged by (core/batch.ts). Default FENCED, the only one production uses. */
  readonly rules?: BatchRules;
}

/** A result row as SQLite returns it (with its resource: the range query reads one resource). */
type SqliteResultRow = ResultDbRow & { resource: string };

export class SqliteFenceStore implements FenceStore {
  readonly #db: Database.Database;
  readonly #nowMs: () => number;
  readonly #retention: number;
  readonly #rules: BatchRules;
  readonly #stmt;
  readonly #reader: BatchReader;
  readonly #applyTx: (ops: readonly FenceOp[]) => readonly OpDecision[];
  #oldestSeq: number;

  /** Opens (creating if needed) and migrates the database. Throws SchemaVersionError for a newer schema. */
  constructor(options: SqliteStoreOptions) {
    this.#nowMs = options.nowMs ?? Date.now;
    this.#retention = options.decisionRetention ?? 0;
    this.#rules = options.rules ?? FENCED;
    const db = new Database(options.path);
    this.#db = db;
    try {
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${options.synchronous === 'NORMAL' ? 'NORMAL' : 'FULL'}`);
      db.pragma('busy_timeout = 5000');
      migrate(db);
    } catch (err) {
      db.close();
      throw err;
    }
    this.#stmt = {
      fence: db.prepare<[string], bigint>('SELECT fence FROM fences WHERE resource = ?').pluck().safeIntegers(true),
      payload: db
        .prepare<[string, string], string>('SELECT payload FROM results WHERE resource = ? AND result_id = ?')
        .pluck(),
      upsertFence: db.prepare<[string, bigint]>(
        'INSERT INTO fences (resource, fence) VALUES (?, ?) ' +
          'ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence WHERE excluded.fence > fences.fence',
      ),
      insertResult: db.prepare<[string, string, bigint, string, string, number]>(
        'INSERT INTO results (resource, result_id, token, worker_id, payload, written_at_ms) VALUES (?, ?, ?, ?, ?, ?)',
      ),
      insertDecision: db.prepare<[string, string, bigint, bigint, string, string | null, string | null, number]>(
        'INSERT INTO decisions (kind, resource, token, fence_before, outcome, result_id, worker_id, at_ms) ' +
          'VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      ),
      prune: db.prepare<[number]>('DELETE FROM decisions WHERE seq <= ?'),
      oldest: db.prepare<[], number | null>('SELECT MIN(seq) FROM decisions').pluck(),
      newest: db.prepare<[], number | null>('SELECT MAX(seq) FROM decisions').pluck(),
      result: db
        .prepare<[string, string], SqliteResultRow>('SELECT * FROM results WHERE resource = ? AND result_id = ?')
        .safeIntegers(true),
      resultSizes: db
        .prepare<[string, bigint, number], { seq: bigint; bytes: bigint }>(
          'SELECT seq, octet_length(payload) + length(result_id) + length(worker_id) AS bytes ' +
            'FROM results WHERE resource = ? AND seq > ? ORDER BY seq LIMIT ?',
        )
        .safeIntegers(true),
      resultRange: db
        .prepare<[string, bigint, bigint], SqliteResultRow>(
          'SELECT * FROM results WHERE resource = ? AND seq > ? AND seq <= ? ORDER BY seq',
        )
        .safeIntegers(true),
      decisions: db
        .prepare<[number, number], DecisionDbRow>('SELECT * FROM decisions WHERE seq > ? ORDER BY seq LIMIT ?')
        .safeIntegers(true),
    };
    this.#oldestSeq = this.#stmt.oldest.get() ?? 0;
    this.#reader = {
      fenceOf: (resource) => this.#stmt.fence.get(resource) ?? 0n,
      payloadOf: (resource, resultId) => this.#stmt.payload.get(resource, resultId),
    };
    const applyTx = db.transaction((ops: readonly FenceOp[]) => this.#apply(ops));
    this.#applyTx = (ops) => applyTx.immediate(ops);
  }

  #apply(ops: readonly FenceOp[]): readonly OpDecision[] {
    const plan = decideBatch(this.#reader, ops, this.#nowMs(), this.#rules);
    const { fences, results, decisions } = plan.effects;
    for (const [resource, fence] of fences) this.#stmt.upsertFence.run(resource, fence);
    for (const r of results) {
      this.#stmt.insertResult.run(r.resource, r.resultId, r.token, r.workerId, r.payload, r.writtenAtMs);
    }
    let lastSeq = 0;
    for (const d of decisions) {
      const info = this.#stmt.insertDecision.run(
        d.kind,
        d.resource,
        d.token,
        d.fenceBefore,
        d.outcome,
        d.resultId ?? null,
        d.workerId ?? null,
        d.atMs,
      );
      lastSeq = Number(info.lastInsertRowid);
      if (this.#oldestSeq === 0) this.#oldestSeq = lastSeq;
    }
    this.#pruneDecisions(lastSeq);
    return plan.decisions;
  }

  /** Prune in chunks (10% slack) so most commits skip the DELETE. */
  #pruneDecisions(lastSeq: number): void {
    if (this.#retention === 0 || lastSeq === 0) return;
    const slack = Math.max(1, Math.floor(this.#retention / 10));
    if (lastSeq - this.#oldestSeq + 1 <= this.#retention + slack) return;
    const cutoff = lastSeq - this.#retention;
    this.#stmt.prune.run(cutoff);
    this.#oldestSeq = cutoff + 1;
  }

  applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    if (ops.length === 0) return Promise.resolve([]);
    try {
      return Promise.resolve(this.#applyTx(ops));
    } catch (err) {
      // Rolled back: re-read the oldest seq in case pruning was part of the failed transaction.
      if (this.#db.open) this.#oldestSeq = this.#stmt.oldest.get() ?? 0;
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  fenceOf(resource: string): Promise<bigint> {
    return Promise.resolve(this.#reader.fenceOf(resource));
  }

  resourcePage(resource: string, query: ResultPageQuery): Promise<ResourcePageRows> {
    const read = this.#db.transaction((): ResourcePageRows => {
      const sizes = this.#stmt.resultSizes.all(resource, query.after, query.limit + 1);
      const taken = pageLength(
        sizes.map((r) => resultJsonBytes(resource.length, Number(r.bytes))),
        query,
      );
      const next = taken === 0 ? query.after : (sizes[taken - 1]?.seq ?? query.after);
      return {
        resource,
        fence: this.#reader.fenceOf(resource),
        results: taken === 0 ? [] : this.#stmt.resultRange.all(resource, query.after, next).map(toResult),
        next,
        hasMore: sizes.length > taken,
      };
    });
    return Promise.resolve(read.deferred());
  }

  resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined> {
    const row = this.#stmt.result.get(resource, resultId);
    return Promise.resolve(row === undefined ? undefined : toResult(row));
  }

  decisions(after: number, limit: number): Promise<DecisionPageRows> {
    const read = this.#db.transaction(() => {
      const rows = this.#stmt.decisions.all(after, limit).map(decisionFromRow);
      const oldest = this.#stmt.oldest.get() ?? 0;
      return { decisions: rows, next: rows.at(-1)?.seq ?? after, oldestRetained: oldest };
    });
    return Promise.resolve(read.deferred());
  }

  lastSeq(): Promise<number> {
    return Promise.resolve(this.#stmt.newest.get() ?? 0);
  }

  /** The connection's durability settings, as SQLite reports them. */
  settings(): { journalMode: string; synchronous: 'OFF' | 'NORMAL' | 'FULL' | 'EXTRA' } {
    const mode = this.#db.pragma('journal_mode', { simple: true }) as string;
    const level = this.#db.pragma('synchronous', { simple: true }) as number;
    const names = ['OFF', 'NORMAL', 'FULL', 'EXTRA'] as const;
    return { journalMode: mode, synchronous: names[level] ?? 'OFF' };
  }

  isOpen(): boolean {
    return this.#db.open;
  }

  close(): Promise<void> {
    if (this.#db.open) this.#db.close();
    return Promise.resolve();
  }
}

const toResult = (row: SqliteResultRow): StoredResultRow => resultFromRow(row.resource, row);
