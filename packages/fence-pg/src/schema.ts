/**
 * The `leasehold` schema in PostgreSQL: one fence table shared by every sink replica
 * (`leasehold-sink --store postgres`) and by `fencedTransaction` in the user's own code.
 *
 *   leasehold.schema_version  one row: application marker and version (the SQLite sink's
 *                             application_id + user_version)
 *   leasehold.fences          resource -> fence (BIGINT, only grows; 0 = never advanced)
 *   leasehold.results         (resource, result_id) -> token, worker id, canonical JSON payload (TEXT:
 *                             byte-exact, so "same payload" stays string equality); `seq`, an
 *                             identity column: the result's position in the append order
 *   leasehold.decisions       the decision log; `seq` is an identity column (see below)
 *
 * Locking rule (what makes several writers safe): whoever commits a decision about a resource holds
 * the row lock of its `fences` row from its decisive read until its COMMIT. The sink takes the locks
 * of a whole batch in one statement, sorted by resource, so two batches never deadlock on fences;
 * `fencedTransaction` takes its one lock (`leasehold.lock_fence`) in the message that also carries
 * its last writes and COMMIT, so no client ever holds a fence row while the server waits for it.
 *
 * `decisions.seq` is allocated while that lock is held, so for ONE resource seq order is commit
 * order. Across resources it is not: two replicas committing at once may commit seq 11 before
 * seq 10. A reader tailing the log by cursor can therefore see seq 11 and later find seq 10;
 * per-resource order (what fences are about) is exact.
 *
 * Migrations only ever append: migration N takes the schema from N-1 to N, all of them in one
 * transaction under an advisory lock (several replicas may start at once). A schema of a newer
 * version, or a `leasehold` schema that is not ours, is refused and left untouched.
 */
import type pg from 'pg';
import { FenceSchemaError } from './errors.js';

export const FENCE_SCHEMA = 'leasehold';
export const FENCE_APPLICATION = 'leasehold-fence';
/** pg_advisory_xact_lock key of the migration ('LSK1' as an int32, like the SQLite application_id). */
const MIGRATION_LOCK = 0x4c534b31;

const MIGRATIONS: readonly string[] = [
  // 1: fences, results, decision log. fillfactor leaves room on each page for the row versions the
  // sink's lock statement creates (HOT updates, no index churn).
  `
  CREATE TABLE leasehold.fences (
    resource TEXT PRIMARY KEY,
    fence    BIGINT NOT NULL CHECK (fence >= 0)
  ) WITH (fillfactor = 70);

  CREATE TABLE leasehold.results (
    resource      TEXT NOT NULL,
    result_id     TEXT NOT NULL,
    token         BIGINT NOT NULL CHECK (token >= 1),
    worker_id     TEXT NOT NULL,
    payload       TEXT NOT NULL,
    written_at_ms BIGINT NOT NULL,
    PRIMARY KEY (resource, result_id)
  );

  CREATE TABLE leasehold.decisions (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('advance', 'write')),
    resource     TEXT NOT NULL,
    token        BIGINT NOT NULL,
    fence_before BIGINT NOT NULL,
    outcome      TEXT NOT NULL,
    result_id    TEXT,
    worker_id    TEXT,
    at_ms        BIGINT NOT NULL
  );
  `,
  // 2: every result gets `seq`, its position in the append order (the cursor of the sink's paged
  // resource view). Allocated by the INSERT, i.e. under the resource's fence-row lock (the locking
  // rule above), so for ONE resource seq order is commit order, like decisions.seq; existing rows
  // are numbered once (a table rewrite under an exclusive lock: plan it for a large table).
  `
  ALTER TABLE leasehold.results ADD COLUMN seq BIGINT GENERATED ALWAYS AS IDENTITY;
  CREATE UNIQUE INDEX results_by_seq ON leasehold.results (resource, seq);
  `,
  // 3: the commit-time fence check of fencedTransaction. Locks the fence row (FOR UPDATE: the newest
  // committed fence) and raises SQLSTATE LH409 (DETAIL: the fence) unless it equals the token, so
  // that the check, the caller's writes and COMMIT travel in ONE message the server runs to the end
  // on its own: the fence row is never locked while the server waits for a (paused) client.
  `
  CREATE OR REPLACE FUNCTION leasehold.lock_fence(p_resource text, p_token bigint) RETURNS bigint
  LANGUAGE plpgsql SET search_path = pg_catalog AS $fn$
  DECLARE
    v_fence bigint;
  BEGIN
    SELECT f.fence INTO v_fence FROM leasehold.fences f WHERE f.resource = p_resource FOR UPDATE;
    IF v_fence IS DISTINCT FROM p_token THEN
      RAISE EXCEPTION 'leasehold: token % is not the fence (%) of %', p_token, coalesce(v_fence, 0), p_resource
        USING ERRCODE = 'LH409', DETAIL = coalesce(v_fence, 0)::text;
    END IF;
    RETURN v_fence;
  END
  $fn$;
  `,
];

/** Schema version this build writes. */
export const FENCE_SCHEMA_VERSION = MIGRATIONS.length;

type Queryable = Pick<pg.PoolClient, 'query'>;

/** The version of the `leasehold` schema in the database (0: none), or throws for a foreign schema. */
export async function readFenceSchemaVersion(db: Queryable): Promise<number> {
  const found = await db.query<{ tables: (string | null)[] | null; marked: boolean | null }>(
    `SELECT array_agg(c.relname::text) AS tables,
            bool_or(c.relname = 'schema_version') AS marked
       FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relkind = 'r'
      WHERE n.nspname = $1`,
    [FENCE_SCHEMA],
  );
  const row = found.rows[0];
  if (row === undefined) return 0;
  const tables = (row.tables ?? []).filter((t) => t !== null);
  if (row.marked !== true) {
    if (tables.length === 0) return 0;
    throw new FenceSchemaError(
      `schema "${FENCE_SCHEMA}" exists without a leasehold schema_version table (tables: ${tables.join(', ')}); ` +
        'refusing to use it',
      0,
    );
  }
  const version = await db.query<{ application: string; version: number }>(
    'SELECT application, version FROM leasehold.schema_version',
  );
  const marker = version.rows[0];
  if (marker === undefined) return 0;
  if (marker.application !== FENCE_APPLICATION) {
    throw new FenceSchemaError(
      `schema "${FENCE_SCHEMA}" belongs to application "${marker.application}", not ${FENCE_APPLICATION}; refusing to use it`,
      marker.version,
    );
  }
  return marker.version;
}

/**
 * Bring the `leasehold` schema to {@link FENCE_SCHEMA_VERSION} (creating it if absent). Safe to call
 * from several processes at once. Throws {@link FenceSchemaError} for a newer or foreign schema.
 */
export async function migrateFenceSchema(pool: pg.Pool): Promise<{ from: number; to: number }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      const from = await readFenceSchemaVersion(client);
      if (from > FENCE_SCHEMA_VERSION) {
        throw new FenceSchemaError(
          `schema "${FENCE_SCHEMA}" is at version ${from}, newer than this build supports (${FENCE_SCHEMA_VERSION}); ` +
            'upgrade, never downgrade',
          from,
        );
      }
      if (from === 0) {
        await client.query(
          `CREATE SCHEMA IF NOT EXISTS leasehold;
           CREATE TABLE leasehold.schema_version (
             singleton   BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
             application TEXT NOT NULL,
             version     INTEGER NOT NULL
           );`,
        );
        await client.query('INSERT INTO leasehold.schema_version (application, version) VALUES ($1, 0)', [
          FENCE_APPLICATION,
        ]);
      }
      for (let version = from + 1; version <= FENCE_SCHEMA_VERSION; version++) {
        const sql = MIGRATIONS[version - 1];
        if (sql === undefined) throw new Error(`missing migration ${version}`);
        await client.query(sql);
        await client.query('UPDATE leasehold.schema_version SET version = $1', [version]);
      }
      await client.query('COMMIT');
      return { from, to: FENCE_SCHEMA_VERSION };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    }
  } finally {
    client.release();
  }
}
