/**
 * `fencedTransaction`: the fence in your own database. Your writes, the fence check, the capability
 * check and the idempotency check commit in ONE PostgreSQL transaction, or none of it does.
 *
 * One call = one transaction (READ COMMITTED, synchronous_commit=on):
 *   check    the capability (the coordinator's Ed25519 signature over resource, token, worker id,
 *            incarnation, verified with public keys only; before any SQL)
 *   BEGIN    and read, without a lock, the fence and the result stored under (resource, resultId)
 *   early    decideWrite (@leasehold/protocol): token < fence STALE_TOKEN, token > fence
 *            FENCE_CONFLICT (fences only grow: a refusal seen without a lock stays true); the
 *            callback does not run, the refusal's decision row commits
 *   callback at the fence, no stored result: the callback runs and its writes are kept; a stored
 *            result: it runs inside a savepoint whose writes are rolled back (a replay)
 *   commit   ONE message: `leasehold.lock_fence(resource, token)` (locks the fence row FOR UPDATE,
 *            raises LH409 unless token == the newest committed fence), the result under resultId
 *            and the decision row, COMMIT. The server runs the whole message without waiting for
 *            the client, so the fence row is locked only while the server works: a caller paused
 *            (GC, SIGSTOP) anywhere in the call never holds the fence row, and a takeover's advance
 *            never waits for it. LH409 rolls everything back; the refusal is logged on its own and
 *            returned (STALE_TOKEN: a takeover advanced the fence meanwhile).
 * The result reaches the caller only after COMMIT. A callback that throws rolls everything back and
 * its error is rethrown unchanged.
 *
 * The sink replicas advance the same `fences` rows (the coordinator advances through them): a
 * takeover's advance and this transaction's commit message both lock the fence row, so the advance
 * lands either before the commit (which is then refused STALE_TOKEN, none of the writes stand) or
 * after it (the writes were made by the holder of the time).
 *
 * Deadlocks and serialization failures (also from the callback's own statements) run the whole
 * transaction again, callback included, from fresh reads (transactionRetryPolicy, cockatiel); so
 * the callback must have no effects outside the transaction it is given. It must not COMMIT or
 * ROLLBACK the client itself.
 */
import {
  canonicalJson,
  decideWrite,
  verifyCapability,
  LeaseholdError,
  type CapabilityPublicKey,
  type FencedTransactionOutcome,
  type JsonValue,
} from '@leasehold/protocol';
import pg from 'pg';
import { isConnectionError, isRetryableTransactionError, unavailable } from './errors.js';
import { transactionRetryPolicy } from './retry.js';

export interface FencedTransactionRequest {
  readonly resource: string;
  /** The grant's fencing token. */
  readonly token: bigint;
  /** The grant's write capability. */
  readonly capability: string;
  readonly workerId: string;
  readonly incarnation: string;
  /**
   * Idempotency key (by business identity, e.g. `task:<taskId>`). With it, the callback's JSON return
   * value is stored under it, and a second call with the same id commits none of its writes.
   * Without it, nothing is stored and every call at the fence runs and commits.
   */
  readonly resultId?: string;
  /**
   * Public keys that verify capabilities (the sink's `CAPABILITY_PUBLIC_KEYS`; read them with
   * `parseCapabilityPublicKeys` from `@leasehold/protocol`). Nothing here can sign a capability.
   */
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
  /** Attempts in all on deadlock / serialization failure (transactionRetryPolicy). Default 5. */
  readonly maxAttempts?: number;
  /**
   * PostgreSQL ends this transaction's session once it sat idle (no statement running) for this
   * long: `idle_in_transaction_session_timeout`, for this transaction only. A caller that paused
   * (GC, SIGSTOP) inside its callback then stops holding the locks on the rows of YOUR tables it
   * wrote, so a new holder writing the same rows waits at most this long; the paused caller's
   * writes were never committed. (The fence row needs no such bound: it is locked only in the
   * commit message.) The worker SDK sets it to the lease's remaining time. Default: the server's
   * setting (usually off).
   */
  readonly idleInTransactionTimeoutMs?: number;
  /** Wall clock for the stored timestamps. Default Date.now. */
  readonly nowMs?: () => number;
}

/** Defined in @leasehold/protocol (the worker's `ctx.fencedTransaction` answers the same). */
export type { FencedTransactionOutcome };

export type FencedCallback<T extends JsonValue | undefined> = (client: pg.PoolClient) => Promise<T>;

interface Read {
  readonly fence: bigint;
  readonly storedPayload: string | undefined;
}

// The fence and the stored result, read without a lock (one row always, also for a never-advanced
// resource: fence 0); also sets synchronous_commit=on for this transaction (set_config(..., true) is
// SET LOCAL), whatever the user's pool says.
const READ_FENCE = `
  SELECT coalesce((SELECT fence FROM leasehold.fences WHERE resource = $1), 0)::text AS fence,
         (SELECT payload FROM leasehold.results WHERE resource = $1 AND result_id = $2) AS payload,
         set_config('synchronous_commit', 'on', true) AS sync`;
// The commit-time check (migration 3): locks the fence row, raises LH409 unless token == fence.
const LOCK_FENCE = `SELECT leasehold.lock_fence($1, $2)`;
/** SQLSTATE of lock_fence's refusal; its DETAIL is the fence it found. */
const NOT_THE_FENCE = 'LH409';
const LOG_DECISION = `
  INSERT INTO leasehold.decisions (kind, resource, token, fence_before, outcome, result_id, worker_id, at_ms)
  VALUES ('write', $1, $2, $3, $4, $5, $6, $7)`;
const STORE_AND_LOG = `
  WITH stored AS (
    INSERT INTO leasehold.results (resource, result_id, token, worker_id, payload, written_at_ms)
    VALUES ($1, $5, $2, $6, $8, $7)
  )
  ${LOG_DECISION}`;

/**
 * `sql` with $1..$n replaced by escaped literals (pg's escapeLiteral; null -> NULL), so that several
 * statements can travel in ONE simple-protocol query: `BEGIN; <read>` and `<lock>; <log>; COMMIT`
 * are one round trip each, and a fenced transaction costs the same number of round trips as the
 * user's own BEGIN / UPDATE / COMMIT. Only our own constant SQL goes through here.
 */
function inline(sql: string, params: readonly (string | null)[]): string {
  return sql.replace(/\$(\d+)/g, (_match, n: string) => {
    const value = params[Number(n) - 1];
    if (value === undefined) throw new LeaseholdError('INTERNAL', `no parameter $${n}`);
    return value === null ? 'NULL' : pg.escapeLiteral(value);
  });
}

type ReadRow = { fence: string; payload: string | null };

// Before the read: a SET LOCAL that bounds how long this transaction may sit idle.
const IDLE_TIMEOUT = `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`;

/** BEGIN (and the idle bound), then read the fence and the stored result: one round trip. */
async function beginAndRead(
  client: pg.PoolClient,
  resource: string,
  resultId: string | undefined,
  idleMs: number | undefined,
): Promise<Read> {
  const idle = idleMs === undefined ? '' : `${inline(IDLE_TIMEOUT, [String(Math.max(1, Math.ceil(idleMs)))])}; `;
  const results = (await client.query(
    `BEGIN; ${idle}${inline(READ_FENCE, [resource, resultId ?? null])}`,
  )) as unknown as pg.QueryResult<ReadRow>[];
  const row = results[results.length - 1]?.rows[0];
  if (row === undefined) throw new LeaseholdError('INTERNAL', 'the fence read returned no row');
  return { fence: BigInt(row.fence), storedPayload: row.payload ?? undefined };
}

/** The fence lock_fence found, when `err` is its refusal (LH409). */
function refusedFence(err: unknown): bigint | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, detail } = err as { code?: unknown; detail?: unknown };
  if (code !== NOT_THE_FENCE || typeof detail !== 'string' || !/^\d+$/.test(detail)) return undefined;
  return BigInt(detail);
}

async function rollback(client: pg.PoolClient): Promise<void> {
  await client.query('ROLLBACK').catch(() => undefined);
}

/** Backoff between attempts of one call (ceilings 5, 10, 20, ... ms, at most 100). */
const RETRY_BACKOFF = { initialMs: 5, maxMs: 100 } as const;

/**
 * Run `callback` in one transaction with the fence, capability and idempotency checks. Returns the
 * outcome as data; throws FORBIDDEN (capability), UNAVAILABLE (PostgreSQL), or the callback's error.
 */
export async function fencedTransaction<T extends JsonValue | undefined>(
  pool: pg.Pool,
  request: FencedTransactionRequest,
  callback: FencedCallback<T>,
): Promise<FencedTransactionOutcome<T>> {
  const { resource, token, workerId, incarnation } = request;
  if (!verifyCapability(request.capabilityPublicKeys, request.capability, { resource, token, workerId, incarnation })) {
    throw new LeaseholdError('FORBIDDEN', 'capability does not match (resource, token, workerId, incarnation)');
  }
  const policy = transactionRetryPolicy({ maxAttempts: request.maxAttempts ?? 5, backoff: RETRY_BACKOFF });
  return policy.execute(() => attemptOnce(pool, request, callback));
}

async function attemptOnce<T extends JsonValue | undefined>(
  pool: pg.Pool,
  request: FencedTransactionRequest,
  callback: FencedCallback<T>,
): Promise<FencedTransactionOutcome<T>> {
  const { resource, token, workerId, resultId } = request;
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw unavailable(err, false);
  }
  let broken: Error | undefined;
  let commitSent = false;
  let inCallback = false;
  // A checked-out client whose connection dies between two queries emits 'error' on itself (the
  // pool only listens to idle ones): without a listener that would kill the user's process.
  const onError = (err: Error) => {
    broken = err;
  };
  client.on('error', onError);
  const atMs = (request.nowMs ?? Date.now)();
  const decisionParams = (fence: bigint, outcome: string): (string | null)[] => [
    resource,
    token.toString(),
    fence.toString(),
    outcome,
    resultId ?? null,
    workerId,
    String(atMs),
  ];
  try {
    const read = await beginAndRead(client, resource, resultId, request.idleInTransactionTimeoutMs);

    // Refused before the callback runs: the token is not the fence (and never will be again).
    const early = decideWrite(read.fence, token, undefined, '');
    if (!early.ok) {
      commitSent = true;
      await client.query(`${inline(LOG_DECISION, decisionParams(read.fence, early.code))}; COMMIT`);
      return early;
    }

    // The commit message: lock and check the fence, the last statement, COMMIT. If the check or the
    // statement fails, the rest of the message is skipped and nothing commits.
    const commit = async (sql: string, params: readonly (string | null)[]): Promise<'committed' | bigint> => {
      commitSent = true;
      try {
        await client.query(`${inline(LOCK_FENCE, [resource, token.toString()])}; ${inline(sql, params)}; COMMIT`);
        return 'committed';
      } catch (err) {
        const fence = refusedFence(err);
        if (fence === undefined) throw err;
        return fence;
      }
    };
    /**
     * lock_fence refused at commit (a takeover advanced the fence while the callback ran): roll the
     * callback's writes back and log the refusal on its own, one round trip.
     */
    const refusedAtCommit = async (fence: bigint): Promise<FencedTransactionOutcome<T>> => {
      const refusal = decideWrite(fence, token, undefined, '');
      const code = refusal.ok ? 'STALE_TOKEN' : refusal.code;
      await client.query(`ROLLBACK; ${inline(LOG_DECISION, decisionParams(fence, code))}`);
      return { ok: false, code, fence };
    };

    if (read.storedPayload === undefined) {
      inCallback = true;
      const result = await callback(client);
      inCallback = false;
      const committed =
        resultId === undefined
          ? await commit(LOG_DECISION, decisionParams(token, 'written'))
          : await commit(STORE_AND_LOG, [...decisionParams(token, 'written'), canonicalJson(result ?? null)]);
      if (committed !== 'committed') return await refusedAtCommit(committed);
      return { ok: true, outcome: 'written', fence: token, result };
    }

    // A result is stored under this id: run the callback for its answer, keep none of its writes.
    await client.query('SAVEPOINT leasehold_replay');
    inCallback = true;
    const result = await callback(client);
    inCallback = false;
    await client.query('ROLLBACK TO SAVEPOINT leasehold_replay');
    const decision = decideWrite(token, token, read.storedPayload, canonicalJson(result ?? null));
    const committed = await commit(LOG_DECISION, decisionParams(token, decision.ok ? decision.outcome : decision.code));
    if (committed !== 'committed') return await refusedAtCommit(committed);
    if (!decision.ok) return decision;
    return { ok: true, outcome: 'replayed', fence: token, result: JSON.parse(read.storedPayload) as JsonValue };
  } catch (err) {
    await rollback(client);
    if (isConnectionError(err)) broken = err instanceof Error ? err : new Error(String(err));
    // The callback's own errors (and retryable ones) go up unchanged; ours are translated here.
    if (inCallback || isRetryableTransactionError(err) || broken === undefined) throw err;
    throw unavailable(err, commitSent);
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
