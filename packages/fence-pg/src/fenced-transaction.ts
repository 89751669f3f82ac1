/**
 * `fencedTransaction`: the fence in your own database. Your writes, the fence check, the capability
 * check and the idempotency check commit in ONE PostgreSQL transaction, or none of it does.
 *
 * One call = one transaction (READ COMMITTED, synchronous_commit=on):
 *   check    the capability (the coordinator's Ed25519 signature over resource, token, worker id,
 *            incarnation, verified with public keys only; before any SQL)
 *   BEGIN
 *   lock     leasehold.fences(resource) FOR UPDATE (an absent row is created at fence 0 and locked,
 *            so a never-advanced resource is ordered too), and read the result stored under
 *            (resource, resultId), if any
 *   decide   decideWrite (@leasehold/protocol): token < fence STALE_TOKEN, token > fence
 *            FENCE_CONFLICT; at the fence: no stored result -> run the callback, keep its writes,
 *            store its JSON return value under resultId (`written`); a stored result -> run the
 *            callback inside a savepoint and roll its writes back: same canonical JSON -> `replayed`,
 *            different -> RESULT_CONFLICT
 *   log      one leasehold.decisions row (refusals too), in the same transaction
 *   COMMIT   the result reaches the caller only after COMMIT
 * A refusal commits only its decision row: the callback never ran, or its writes were rolled back.
 * A callback that throws rolls everything back and its error is rethrown unchanged.
 *
 * The sink replicas advance the same `fences` rows (the coordinator advances through them); an
 * advance waits for this transaction's lock and vice versa, so a takeover lands either before this
 * transaction (it is refused STALE_TOKEN) or after its COMMIT (its writes stand, made by the holder).
 *
 * Deadlocks and serialization failures (also from the callback's own statements) run the whole
 * transaction again, callback included, from fresh reads; so the callback must have no effects
 * outside the transaction it is given. It must not COMMIT or ROLLBACK the client itself.
 */
import {
  backoffDelayMs,
  canonicalJson,
  decideWrite,
  verifyCapability,
  LeaseholdError,
  type CapabilityPublicKey,
  type JsonValue,
} from '@leasehold/protocol';
import pg from 'pg';
import { isConnectionError, isRetryableTransactionError, unavailable } from './errors.js';

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
  /** Attempts on deadlock / serialization failure. Default 5. */
  readonly maxAttempts?: number;
  /**
   * PostgreSQL ends this transaction's session once it sat idle (no statement running) for this
   * long: `idle_in_transaction_session_timeout`, for this transaction only. A caller that paused
   * (GC, SIGSTOP) inside its callback then stops holding the fence row's lock, so a takeover's
   * advance waits at most this long; the paused caller's writes were never committed. The worker
   * SDK sets it to the lease's remaining time. Default: the server's setting (usually off).
   */
  readonly idleInTransactionTimeoutMs?: number;
  /** Wall clock for the stored timestamps. Default Date.now. */
  readonly nowMs?: () => number;
}

export type FencedTransactionOutcome<T> =
  /** Committed: the callback's writes, its result (under resultId, if given) and the decision. */
  | { readonly ok: true; readonly outcome: 'written'; readonly fence: bigint; readonly result: T }
  /** A result was already stored under resultId with the same canonical JSON; this call's writes were rolled back. */
  | { readonly ok: true; readonly outcome: 'replayed'; readonly fence: bigint; readonly result: JsonValue }
  /** Refused; nothing of the callback was committed. */
  | {
      readonly ok: false;
      readonly code: 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT';
      readonly fence: bigint;
    };

export type FencedCallback<T extends JsonValue | undefined> = (client: pg.PoolClient) => Promise<T>;

interface Locked {
  readonly fence: bigint;
  readonly storedPayload: string | undefined;
}

// The fence row FOR UPDATE plus the stored result in one round trip. If a writer of the same result
// id commits while this waits for the lock, the join misses it (the statement's snapshot is older);
// the INSERT below then fails on results_pkey and the attempt is retried, seeing it.
const LOCK_FENCE = `
  SELECT f.fence::text AS fence, r.payload, set_config('synchronous_commit', 'on', true) AS sync
    FROM leasehold.fences f
    LEFT JOIN leasehold.results r ON r.resource = f.resource AND r.result_id = $2
   WHERE f.resource = $1
     FOR UPDATE OF f`;
// Rare path (never-advanced resource): create the row at 0 and lock it, so the refusal is ordered.
const LOCK_ABSENT_FENCE = `
  INSERT INTO leasehold.fences AS f (resource, fence) VALUES ($1, 0)
  ON CONFLICT (resource) DO UPDATE SET fence = f.fence
  RETURNING f.fence::text AS fence,
            (SELECT payload FROM leasehold.results WHERE resource = $1 AND result_id = $2) AS payload,
            set_config('synchronous_commit', 'on', true) AS sync`;
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
 * statements can travel in ONE simple-protocol query: `BEGIN; <lock>` and `<log>; COMMIT` are one
 * round trip each, and a fenced transaction costs the same number of round trips as the user's own
 * BEGIN / UPDATE / COMMIT. Only our own constant SQL goes through here.
 */
function inline(sql: string, params: readonly (string | null)[]): string {
  return sql.replace(/\$(\d+)/g, (_match, n: string) => {
    const value = params[Number(n) - 1];
    if (value === undefined) throw new LeaseholdError('INTERNAL', `no parameter $${n}`);
    return value === null ? 'NULL' : pg.escapeLiteral(value);
  });
}

type LockRow = { fence: string; payload: string | null };

// Before the lock: a SET LOCAL that bounds how long this transaction may sit idle.
const IDLE_TIMEOUT = `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`;

/** BEGIN (and the idle bound), then lock the fence row and read the stored result: one round trip. */
async function beginAndLock(
  client: pg.PoolClient,
  resource: string,
  resultId: string | undefined,
  idleMs: number | undefined,
): Promise<Locked> {
  const idle = idleMs === undefined ? '' : `${inline(IDLE_TIMEOUT, [String(Math.max(1, Math.ceil(idleMs)))])}; `;
  const results = (await client.query(
    `BEGIN; ${idle}${inline(LOCK_FENCE, [resource, resultId ?? null])}`,
  )) as unknown as pg.QueryResult<LockRow>[];
  let rows = results[results.length - 1]?.rows ?? [];
  if (rows.length === 0) {
    rows = (await client.query<LockRow>(LOCK_ABSENT_FENCE, [resource, resultId ?? null])).rows;
  }
  const row = rows[0];
  if (row === undefined) throw new LeaseholdError('INTERNAL', 'fence row neither found nor created');
  return { fence: BigInt(row.fence), storedPayload: row.payload ?? undefined };
}

async function rollback(client: pg.PoolClient): Promise<void> {
  await client.query('ROLLBACK').catch(() => undefined);
}

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
  const maxAttempts = Math.max(1, request.maxAttempts ?? 5);
  for (let attempt = 1; ; attempt++) {
    try {
      return await attemptOnce(pool, request, callback);
    } catch (err) {
      if (attempt >= maxAttempts || !isRetryableTransactionError(err)) throw err;
      await new Promise((resolve) =>
        setTimeout(resolve, backoffDelayMs(attempt - 1, { initialMs: 5, maxMs: 100 }, Math.random)),
      );
    }
  }
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
  try {
    // The lock statement also sets synchronous_commit=on for this transaction (set_config(..., true)
    // is SET LOCAL), whatever the user's pool says.
    const { fence, storedPayload } = await beginAndLock(client, resource, resultId, request.idleInTransactionTimeoutMs);
    const atMs = (request.nowMs ?? Date.now)();
    // The last statement and COMMIT in one round trip; if the statement fails, COMMIT never runs.
    const finish = async (sql: string, params: readonly (string | null)[]) => {
      commitSent = true;
      await client.query(`${inline(sql, params)}; COMMIT`);
    };
    const logAndCommit = (outcome: string) =>
      finish(LOG_DECISION, [
        resource,
        token.toString(),
        fence.toString(),
        outcome,
        resultId ?? null,
        workerId,
        String(atMs),
      ]);

    // Refused before the callback runs: the token is not the fence.
    const early = decideWrite(fence, token, undefined, '');
    if (!early.ok) {
      await logAndCommit(early.code);
      return early;
    }

    if (storedPayload === undefined) {
      inCallback = true;
      const result = await callback(client);
      inCallback = false;
      if (resultId === undefined) {
        await logAndCommit('written');
      } else {
        const payload = canonicalJson(result ?? null);
        await finish(STORE_AND_LOG, [
          resource,
          token.toString(),
          fence.toString(),
          'written',
          resultId,
          workerId,
          String(atMs),
          payload,
        ]);
      }
      return { ok: true, outcome: 'written', fence, result };
    }

    // A result is stored under this id: run the callback for its answer, keep none of its writes.
    await client.query('SAVEPOINT leasehold_replay');
    inCallback = true;
    const result = await callback(client);
    inCallback = false;
    await client.query('ROLLBACK TO SAVEPOINT leasehold_replay');
    const decision = decideWrite(fence, token, storedPayload, canonicalJson(result ?? null));
    await logAndCommit(decision.ok ? decision.outcome : decision.code);
    if (!decision.ok) return decision;
    return { ok: true, outcome: 'replayed', fence, result: JSON.parse(storedPayload) as JsonValue };
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
