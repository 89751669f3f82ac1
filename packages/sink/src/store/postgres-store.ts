/**
 * The PostgreSQL implementation of {@link FenceStore}, on node-postgres (pooled). Several sink
 * processes may use one database at once (stateless active-active replicas), and the user's own
 * `fencedTransaction` (@leasehold/fence-pg) shares the same `leasehold` schema and its fence rows.
 *
 * Durability: every connection starts with `synchronous_commit=on`; `applyBatch` resolves only
 * after COMMIT returned, i.e. after the commit record is flushed (and, with a synchronous standby
 * configured, replicated). `fsync=off` on the server would void that: it is logged at open.
 *
 * One batch = one READ COMMITTED transaction, in arrival order:
 *   lock    one statement: INSERT every resource of the batch at fence 0, sorted by resource,
 *           ON CONFLICT DO UPDATE (a no-op update): every fence row of the batch is now row-locked
 *           (existing or just created), in one global order, so two replicas' batches never
 *           deadlock on fences; RETURNING the current fences (the newest committed values)
 *   reads   results(resource, result_id) of the batch's writes; a new statement, so a new snapshot
 *           taken after the locks were granted: it sees everything the previous holder committed
 *   decides decideBatch (src/core) over those reads plus the batch's own earlier effects
 *   writes  one statement: fences upsert (guarded: only ever grows), results insert, one
 *           decisions row per op in arrival order (seq from the identity, allocated under the locks)
 *   COMMIT  then the answers; on any error the whole batch rolls back
 * A deadlock or serialization failure (40P01, 40001) — e.g. against a user transaction — runs the
 * batch again from fresh reads (fence-pg's transactionRetryPolicy, cockatiel: `maxAttempts` in all,
 * backoffDelayMs with ceilings 4, 8, 16, 32 ms), so every answer is still the sequential one. A
 * connection failure rejects with UNAVAILABLE (saying whether COMMIT was already sent: then the
 * outcome is unknown).
 *
 * Lock waits are bounded: the batch's lock statement waits at most `lockTimeoutMs` (SET LOCAL
 * lock_timeout) for a fence row another session holds. fencedTransaction (@leasehold/fence-pg)
 * never holds a fence row while it waits for its caller (it locks in its commit message only), so
 * a paused worker cannot be that session; an operator's session, or a client of an older fence-pg,
 * can. Past the bound the batch rolls back and rejects with UNAVAILABLE (retryable, nothing applied,
 * the store stays healthy): callers retry, and the batches after it are not held.
 *
 * Readiness: `isOpen()` is false while PostgreSQL is unreachable (a probe every `healthIntervalMs`,
 * and every failed batch), so /readyz answers 503 until it is back.
 */
import {
  FENCE_SCHEMA_VERSION,
  FenceSchemaError,
  isConnectionError,
  isRetryableTransactionError,
  migrateFenceSchema,
  transactionRetryPolicy,
  unavailable,
} from '@leasehold/fence-pg';
import { LeaseholdError } from '@leasehold/protocol';
import type { RetryPolicy } from 'cockatiel';
import pg from 'pg';
import { decideBatch, type BatchReader, type BatchRules } from '../core/batch.js';
import type { FenceOp, OpDecision } from '../core/ops.js';
import { pageLength, resultJsonBytes } from '../core/page.js';
import { SchemaVersionError } from '../errors.js';
import { decisionFromRow, resultFromRow, type DecisionDbRow, type ResultDbRow } from './db-rows.js';
import type { DecisionPageRows, FenceStore, ResourcePageRows, ResultPageQuery, StoredResultRow } from './port.js';
import { connectionTls, NO_FILES, type PostgresConnection } from './postgres-tls.js';

export interface PostgresStoreOptions {
  /**
   * postgres://user[:password]@host:port/database[?options]; TLS as libpq spells it:
   * `sslmode=verify-full&sslrootcert=CA[&sslcert=..&sslkey=..]` (see postgres-tls.ts).
   */
  readonly url: string;
  /**
   * The connection with the URL's TLS files already read (`connectionTls` with a file reader, in
   * main.ts). Without it, the URL may name no TLS files.
   */
  readonly connection?: PostgresConnection;
  /** Pool connections (one batch at a time, plus reads and the probe). Default 4. */
  readonly poolSize?: number;
  /** Keep at least this many newest decisions; 0 keeps all. */
  readonly decisionRetention?: number;
  readonly nowMs?: () => number;
  /** Attempts per batch on deadlock / serialization failure. Default 8. */
  readonly maxAttempts?: number;
  /** Readiness probe period. Default 1000 ms. */
  readonly healthIntervalMs?: number;
  /** Server-side statement timeout. Default 30000 ms. */
  readonly statementTimeoutMs?: number;
  /**
   * How long a batch waits for a fence row locked by another session before it gives up with
   * UNAVAILABLE (PostgreSQL's lock_timeout, for the batch's transaction only). Default 5000 ms.
   */
  readonly lockTimeoutMs?: number;
  /** Called before a batch is run again (metrics, logs). */
  readonly onRetry?: (info: { readonly code: string; readonly attempt: number }) => void;
  /** Called when reachability changes. */
  readonly onHealth?: (info: { readonly healthy: boolean; readonly error?: unknown }) => void;
  /** Shown in pg_stat_activity. Default 'leasehold-sink'. */
  readonly applicationName?: string;
  /** The rule writes are judged by (core/batch.ts). Default FENCED, the only one production uses. */
  readonly rules?: BatchRules;
  /**
   * The statement that reads a batch's fences (`$1`: the resources, sorted; rows of `resource`,
   * `fence` as text). Default: the upsert that locks each fence row until the batch commits, which
   * is what makes several sinks on one database safe. A seam like `rules`: the two-replica
   * property test passes a plain SELECT to show its check catches the race.
   */
  readonly readFencesSql?: string;
}

/** Backoff between attempts of a batch (ceilings 4, 8, 16, 32 ms). */
const RETRY_BACKOFF = { initialMs: 4, maxMs: 32 } as const;

// See the header: bounds the lock statement's wait, for this transaction only.
const LOCK_TIMEOUT = `SELECT set_config('lock_timeout', $1, true)`;
/** lock_not_available: lock_timeout expired (or NOWAIT). */
const LOCK_NOT_AVAILABLE = '55P03';

function isLockTimeout(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === LOCK_NOT_AVAILABLE;
}

/** A fence row stayed locked by another session past lockTimeoutMs: retryable, nothing was applied. */
function lockTimedOut(cause: unknown, lockTimeoutMs: string): LeaseholdError {
  return new LeaseholdError(
    'UNAVAILABLE',
    `a fence row of this batch stayed locked by another session for ${lockTimeoutMs} ms (lock_timeout); nothing was applied`,
    { cause, retryable: true },
  );
}

// See the header: locks and reads the fences of a batch (sorted, one statement).
const LOCK_FENCES = `
  INSERT INTO leasehold.fences AS f (resource, fence)
  SELECT r, 0 FROM unnest($1::text[]) AS r ORDER BY r
  ON CONFLICT (resource) DO UPDATE SET fence = f.fence
  RETURNING f.resource, f.fence::text AS fence`;
const READ_PAYLOADS = `
  SELECT r.resource, r.result_id, r.payload
    FROM leasehold.results r
    JOIN unnest($1::text[], $2::text[]) AS k(resource, result_id)
      ON r.resource = k.resource AND r.result_id = k.result_id`;
// Fences only ever grow (guarded upsert), results insert, decisions in arrival order.
const APPLY = `
  WITH grown AS (
    INSERT INTO leasehold.fences AS f (resource, fence)
    SELECT * FROM unnest($1::text[], $2::bigint[])
    ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence WHERE excluded.fence > f.fence
  ), stored AS (
    INSERT INTO leasehold.results (resource, result_id, token, worker_id, payload, written_at_ms)
    SELECT * FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::bigint[])
  ), logged AS (
    INSERT INTO leasehold.decisions (kind, resource, token, fence_before, outcome, result_id, worker_id, at_ms)
    SELECT kind, resource, token, fence_before, outcome, result_id, worker_id, at_ms
      FROM unnest($9::text[], $10::text[], $11::bigint[], $12::bigint[], $13::text[], $14::text[], $15::text[],
                  $16::bigint[]) WITH ORDINALITY
           AS d(kind, resource, token, fence_before, outcome, result_id, worker_id, at_ms, ord)
     ORDER BY ord
    RETURNING seq
  )
  SELECT max(seq)::text AS last_seq FROM logged`;
// A page of a resource's results: the sizes of the next candidates first (octet_length reads a
// TOASTed payload's length from its header, not the payload), then the fence and the rows taken.
// Results of one resource get their seq under its fence lock, so every row in (after, last seen]
// was committed before the sizes statement saw `last`: the second statement finds the same rows.
// (ORDER BY r.seq, qualified: a bare `seq` would sort by the text output column.)
const RESULT_SIZES = `
  SELECT r.seq::text AS seq, octet_length(r.payload) + octet_length(r.result_id) + octet_length(r.worker_id) AS bytes
    FROM leasehold.results r
   WHERE r.resource = $1 AND r.seq > $2
   ORDER BY r.seq
   LIMIT $3`;
const RESULT_RANGE = `
  SELECT f.fence::text AS fence, r.seq::text AS seq, r.result_id, r.token::text AS token, r.worker_id, r.payload,
         r.written_at_ms::text AS written_at_ms
    FROM (SELECT $1::text AS resource) k
    LEFT JOIN leasehold.fences f ON f.resource = k.resource
    LEFT JOIN leasehold.results r ON r.resource = k.resource AND r.seq > $2 AND r.seq <= $3
   ORDER BY r.seq`;
const RESULT = `
  SELECT seq::text AS seq, result_id, token::text AS token, worker_id, payload, written_at_ms::text AS written_at_ms
    FROM leasehold.results WHERE resource = $1 AND result_id = $2`;
const DECISIONS = `
  SELECT (SELECT min(seq) FROM leasehold.decisions)::text AS oldest, d.seq::text AS seq, d.kind, d.resource,
         d.token::text AS token, d.fence_before::text AS fence_before, d.outcome, d.result_id, d.worker_id,
         d.at_ms::text AS at_ms
    FROM (SELECT 1) one
    LEFT JOIN LATERAL (SELECT * FROM leasehold.decisions WHERE seq > $1 ORDER BY seq LIMIT $2) d ON true`;

/** A decisions page row: the oldest retained seq, and no decision (seq null) when the page is empty. */
type DecisionPageDbRow = { oldest: string | null } & (DecisionDbRow | (Omit<DecisionDbRow, 'seq'> & { seq: null }));

const keyOf = (resource: string, resultId: string) => `${resource}\u0000${resultId}`;

/** The URL with our session settings added to its `options` (kept if it has some). */
function withSessionOptions(url: string, statementTimeoutMs: number): string {
  const parsed = new URL(url);
  const ours = `-c synchronous_commit=on -c statement_timeout=${statementTimeoutMs}`;
  const theirs = parsed.searchParams.get('options');
  parsed.searchParams.set('options', theirs === null || theirs.trim() === '' ? ours : `${theirs} ${ours}`);
  return parsed.toString();
}

export class PostgresFenceStore implements FenceStore {
  readonly #pool: pg.Pool;
  readonly #nowMs: () => number;
  readonly #retention: number;
  readonly #retry: RetryPolicy;
  readonly #lockTimeoutMs: string;
  readonly #options: PostgresStoreOptions;
  readonly #probe: NodeJS.Timeout;
  #open = true;
  #healthy = true;
  #sincePrune = 0;

  private constructor(pool: pg.Pool, options: PostgresStoreOptions) {
    this.#pool = pool;
    this.#options = options;
    this.#nowMs = options.nowMs ?? Date.now;
    this.#retention = options.decisionRetention ?? 0;
    this.#retry = transactionRetryPolicy({ maxAttempts: options.maxAttempts ?? 8, backoff: RETRY_BACKOFF });
    this.#retry.onRetry((reason) => {
      const code = 'error' in reason ? (reason.error as { code?: unknown }).code : undefined;
      if (typeof code === 'string') options.onRetry?.({ code, attempt: reason.attempt });
    });
    this.#lockTimeoutMs = String(Math.max(1, Math.ceil(options.lockTimeoutMs ?? 5000)));
    this.#probe = setInterval(() => void this.#checkHealth(), options.healthIntervalMs ?? 1000);
    this.#probe.unref();
  }

  /**
   * Connect, migrate the `leasehold` schema (safe with several replicas starting at once) and
   * return the store. Throws SchemaVersionError for a newer or foreign schema, and the connection
   * error when PostgreSQL is unreachable.
   */
  static async open(options: PostgresStoreOptions): Promise<PostgresFenceStore> {
    const { url: bare, ssl } = options.connection ?? connectionTls(options.url, NO_FILES);
    const url = withSessionOptions(bare, options.statementTimeoutMs ?? 30_000);
    const pool = new pg.Pool({
      connectionString: url,
      ssl,
      max: options.poolSize ?? 4,
      connectionTimeoutMillis: 5000,
      idleTimeoutMillis: 30_000,
      application_name: options.applicationName ?? 'leasehold-sink',
      // Queued queries go out at once (BEGIN + lock + payload read in one write; APPLY + COMMIT in
      // another): two round trips per batch, so a busy HTTP event loop costs two turns, not five.
      pipeline: true,
    });
    // An idle client whose server went away emits 'error' on the pool: without a listener the
    // process would die. The probe and the next batch notice; the pool drops the client.
    pool.on('error', () => undefined);
    try {
      await migrateFenceSchema(pool);
    } catch (err) {
      await pool.end();
      if (err instanceof FenceSchemaError) throw new SchemaVersionError(err.message, err.foundVersion);
      throw err;
    }
    return new PostgresFenceStore(pool, options);
  }

  /** Session settings as PostgreSQL reports them for a pooled connection (tests, diagnostics). */
  async settings(): Promise<{ synchronousCommit: string; fsync: string; schemaVersion: number }> {
    const { rows } = await this.#pool.query<{ sc: string; fsync: string }>(
      "SELECT current_setting('synchronous_commit') AS sc, current_setting('fsync') AS fsync",
    );
    return { synchronousCommit: rows[0]?.sc ?? '', fsync: rows[0]?.fsync ?? '', schemaVersion: FENCE_SCHEMA_VERSION };
  }

  async applyBatch(ops: readonly FenceOp[]): Promise<readonly OpDecision[]> {
    if (ops.length === 0) return [];
    if (!this.#open) throw unavailable(new Error('store is closed'), false);
    const { decisions, lastSeq } = await this.#retry.execute(() => this.#attempt(ops));
    this.#setHealthy(true);
    this.#prune(lastSeq, ops.length);
    return decisions;
  }

  async #attempt(ops: readonly FenceOp[]): Promise<{ decisions: readonly OpDecision[]; lastSeq: bigint }> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (err) {
      this.#setHealthy(false, err);
      throw unavailable(err, false);
    }
    let commitSent = false;
    let broken: Error | undefined;
    // A checked-out client whose connection dies between two queries emits 'error' on itself (the
    // pool only listens to idle ones): without a listener that would kill the process.
    const onError = (err: Error) => {
      broken = err;
    };
    client.on('error', onError);
    try {
      // Queued together: node-postgres sends each as soon as the previous one completed, with no
      // event-loop turn in between (the HTTP work of the next batch cannot delay them). The payload
      // read is a new statement, so its snapshot is taken after the locks were granted.
      const resources = [...new Set(ops.map((op) => op.resource))];
      const begun = client.query('BEGIN');
      const bounded = client.query(LOCK_TIMEOUT, [this.#lockTimeoutMs]);
      const locked = client.query<{ resource: string; fence: string }>(this.#options.readFencesSql ?? LOCK_FENCES, [
        resources,
      ]);
      const read = this.#readPayloads(client, ops);
      const [, , fenceRows, payloads] = await settleAll([begun, bounded, locked, read]);
      const fences = new Map(fenceRows.rows.map((r) => [r.resource, BigInt(r.fence)]));
      const reader: BatchReader = {
        fenceOf: (resource) => fences.get(resource) ?? 0n,
        payloadOf: (resource, resultId) => payloads.get(keyOf(resource, resultId)),
      };
      const plan = decideBatch(reader, ops, this.#nowMs(), this.#options.rules);
      const apply = client.query<{ last_seq: string | null }>(APPLY, applyParams(plan.effects));
      // COMMIT is queued behind APPLY; if APPLY failed, PostgreSQL answers that COMMIT with a
      // rollback, and the APPLY error below is what this batch reports.
      commitSent = true;
      const [applied] = await settleAll([apply, client.query('COMMIT')]);
      return { decisions: plan.decisions, lastSeq: BigInt(applied.rows[0]?.last_seq ?? '0') };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      if (isLockTimeout(err)) throw lockTimedOut(err, this.#lockTimeoutMs);
      if (isRetryableTransactionError(err) || !isConnectionError(err)) throw err;
      broken = err instanceof Error ? err : new Error(String(err));
      this.#setHealthy(false, err);
      throw unavailable(err, commitSent);
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  /** Queues the read at once (no await before client.query), so it runs right after the lock. */
  async #readPayloads(client: pg.PoolClient, ops: readonly FenceOp[]): Promise<Map<string, string>> {
    const resources: string[] = [];
    const resultIds: string[] = [];
    for (const op of ops) {
      if (op.kind !== 'write') continue;
      resources.push(op.resource);
      resultIds.push(op.resultId);
    }
    const payloads = new Map<string, string>();
    if (resources.length === 0) return payloads;
    const query = client.query<{ resource: string; result_id: string; payload: string }>(READ_PAYLOADS, [
      resources,
      resultIds,
    ]);
    const { rows } = await query;
    for (const r of rows) payloads.set(keyOf(r.resource, r.result_id), r.payload);
    return payloads;
  }

  /** Prune in chunks (10% slack), outside the batch transaction; a failure is retried next time. */
  #prune(lastSeq: bigint, added: number): void {
    if (this.#retention === 0 || lastSeq === 0n) return;
    this.#sincePrune += added;
    if (this.#sincePrune <= Math.max(1, Math.floor(this.#retention / 10))) return;
    this.#sincePrune = 0;
    const cutoff = lastSeq - BigInt(this.#retention);
    if (cutoff <= 0n) return;
    this.#pool.query('DELETE FROM leasehold.decisions WHERE seq <= $1', [cutoff.toString()]).catch(() => undefined);
  }

  async #checkHealth(): Promise<void> {
    if (!this.#open) return;
    try {
      await this.#pool.query('SELECT 1');
      this.#setHealthy(true);
    } catch (err) {
      this.#setHealthy(false, err);
    }
  }

  #setHealthy(healthy: boolean, error?: unknown): void {
    if (healthy === this.#healthy) return;
    this.#healthy = healthy;
    this.#options.onHealth?.(error === undefined ? { healthy } : { healthy, error });
  }

  async fenceOf(resource: string): Promise<bigint> {
    const { rows } = await this.#read<{ fence: string }>(
      'SELECT fence::text AS fence FROM leasehold.fences WHERE resource = $1',
      [resource],
    );
    return BigInt(rows[0]?.fence ?? '0');
  }

  async resourcePage(resource: string, query: ResultPageQuery): Promise<ResourcePageRows> {
    const sizes = await this.#read<{ seq: string; bytes: number }>(RESULT_SIZES, [
      resource,
      query.after.toString(),
      query.limit + 1,
    ]);
    const taken = pageLength(
      sizes.rows.map((r) => resultJsonBytes(resource.length, r.bytes)),
      query,
    );
    const last = sizes.rows[taken - 1];
    const next = taken === 0 || last === undefined ? query.after : BigInt(last.seq);
    type Row = { fence: string | null } & ({ result_id: null } | ResultDbRow);
    const { rows } = await this.#read<Row>(RESULT_RANGE, [resource, query.after.toString(), next.toString()]);
    const results: StoredResultRow[] = [];
    for (const row of rows) if (row.result_id !== null) results.push(resultFromRow(resource, row));
    return { resource, fence: BigInt(rows[0]?.fence ?? '0'), results, next, hasMore: sizes.rows.length > taken };
  }

  async resultOf(resource: string, resultId: string): Promise<StoredResultRow | undefined> {
    const { rows } = await this.#read<ResultDbRow>(RESULT, [resource, resultId]);
    const row = rows[0];
    return row === undefined ? undefined : resultFromRow(resource, row);
  }

  async decisions(after: number, limit: number): Promise<DecisionPageRows> {
    const { rows } = await this.#read<DecisionPageDbRow>(DECISIONS, [after, limit]);
    const decisions = rows.filter((r): r is DecisionPageDbRow & DecisionDbRow => r.seq !== null).map(decisionFromRow);
    return {
      decisions,
      next: decisions.at(-1)?.seq ?? after,
      oldestRetained: Number(rows[0]?.oldest ?? '0'),
    };
  }

  async lastSeq(): Promise<number> {
    const { rows } = await this.#read<{ last: string }>(
      'SELECT coalesce(max(seq), 0)::text AS last FROM leasehold.decisions',
      [],
    );
    return Number(rows[0]?.last ?? '0');
  }

  async #read<R extends pg.QueryResultRow>(sql: string, params: unknown[]): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(sql, params);
    } catch (err) {
      if (!isConnectionError(err)) throw err;
      this.#setHealthy(false, err);
      throw unavailable(err, false);
    }
  }

  isOpen(): boolean {
    return this.#open && this.#healthy;
  }

  async close(): Promise<void> {
    if (!this.#open) return;
    this.#open = false;
    clearInterval(this.#probe);
    await this.#pool.end();
  }
}

/**
 * Promise.all that waits for every promise to settle before rejecting (with the first rejection):
 * queued queries on one client must all be finished before the client is rolled back or released.
 */
async function settleAll<T extends readonly unknown[]>(promises: { [K in keyof T]: Promise<T[K]> }): Promise<T> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

function applyParams(effects: ReturnType<typeof decideBatch>['effects']): unknown[] {
  const fences = [...effects.fences];
  const { results, decisions } = effects;
  return [
    fences.map(([resource]) => resource),
    fences.map(([, fence]) => fence.toString()),
    results.map((r) => r.resource),
    results.map((r) => r.resultId),
    results.map((r) => r.token.toString()),
    results.map((r) => r.workerId),
    results.map((r) => r.payload),
    results.map((r) => String(r.writtenAtMs)),
    decisions.map((d) => d.kind),
    decisions.map((d) => d.resource),
    decisions.map((d) => d.token.toString()),
    decisions.map((d) => d.fenceBefore.toString()),
    decisions.map((d) => d.outcome),
    decisions.map((d) => d.resultId ?? null),
    decisions.map((d) => d.workerId ?? null),
    decisions.map((d) => String(d.atMs)),
  ];
}
