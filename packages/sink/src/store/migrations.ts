/**
 * Versioned SQLite schema. `PRAGMA user_version` holds the version; `PRAGMA application_id` marks
 * the file as a leasehold sink database. Migrations only ever append: migration N takes the
 * schema from version N-1 to N and runs in one IMMEDIATE transaction together with the version bump.
 * A database written by a newer build (user_version above ours) is refused, never downgraded.
 */
import type Database from 'better-sqlite3';
import { SchemaVersionError } from '../errors.js';

/** 'LSK1' as a big-endian int32. */
export const APPLICATION_ID = 0x4c534b31;

const MIGRATIONS: readonly string[] = [
  // 1: fences, results, decision log. `results` keeps a rowid (payloads are large rows) and
  // `decisions.seq` is the rowid: max(seq)+1 on insert. Retention never deletes the newest entry,
  // so a sequence number is never reused, without AUTOINCREMENT's extra write per insert.
  `
  CREATE TABLE fences (
    resource TEXT PRIMARY KEY,
    fence    INTEGER NOT NULL CHECK (fence >= 0)
  ) WITHOUT ROWID;

  CREATE TABLE results (
    resource      TEXT NOT NULL,
    result_id     TEXT NOT NULL,
    token         INTEGER NOT NULL CHECK (token >= 1),
    worker_id     TEXT NOT NULL,
    payload       TEXT NOT NULL,
    written_at_ms INTEGER NOT NULL,
    PRIMARY KEY (resource, result_id)
  );

  CREATE TABLE decisions (
    seq          INTEGER PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('advance', 'write')),
    resource     TEXT NOT NULL,
    token        INTEGER NOT NULL,
    fence_before INTEGER NOT NULL,
    outcome      TEXT NOT NULL,
    result_id    TEXT,
    worker_id    TEXT,
    at_ms        INTEGER NOT NULL
  );
  `,
  // 2: every result gets `seq`, its position in the append order: the cursor of the paged
  // `GET /v1/resources/:resource` (src/core/page.ts). An explicit INTEGER PRIMARY KEY (the rowid
  // alias), because VACUUM may renumber an implicit rowid; without AUTOINCREMENT because results are
  // never deleted, so max(seq)+1 never reuses one. Existing results keep their insertion order (their
  // old rowids). The table is rebuilt once: on a large database this migration needs as much free
  // disk as the results take, for as long as the copy runs.
  `
  CREATE TABLE results_v2 (
    seq           INTEGER PRIMARY KEY,
    resource      TEXT NOT NULL,
    result_id     TEXT NOT NULL,
    token         INTEGER NOT NULL CHECK (token >= 1),
    worker_id     TEXT NOT NULL,
    payload       TEXT NOT NULL,
    written_at_ms INTEGER NOT NULL
  );
  INSERT INTO results_v2 (seq, resource, result_id, token, worker_id, payload, written_at_ms)
    SELECT rowid, resource, result_id, token, worker_id, payload, written_at_ms FROM results ORDER BY rowid;
  DROP TABLE results;
  ALTER TABLE results_v2 RENAME TO results;
  CREATE UNIQUE INDEX results_by_id ON results (resource, result_id);
  CREATE INDEX results_by_seq ON results (resource, seq);
  `,
];

/** Schema version this build writes. */
export const SCHEMA_VERSION = MIGRATIONS.length;

export function readSchemaVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number;
}

/**
 * Bring `db` to {@link SCHEMA_VERSION}. Throws {@link SchemaVersionError} for a database of a newer
 * version or of another application; leaves such a file untouched.
 */
export function migrate(db: Database.Database): { from: number; to: number } {
  const appId = db.pragma('application_id', { simple: true }) as number;
  const from = readSchemaVersion(db);
  if (appId !== 0 && appId !== APPLICATION_ID) {
    throw new SchemaVersionError(
      `database is not a leasehold sink database (application_id ${appId}); refusing to open it`,
      from,
    );
  }
  if (from > SCHEMA_VERSION) {
    throw new SchemaVersionError(
      `database schema version ${from} is newer than this build supports (${SCHEMA_VERSION}); ` +
        'upgrade the sink, never downgrade it',
      from,
    );
  }
  for (let version = from + 1; version <= SCHEMA_VERSION; version++) {
    const sql = MIGRATIONS[version - 1];
    if (sql === undefined) throw new Error(`missing migration ${version}`);
    db.transaction(() => {
      db.exec(sql);
      db.pragma(`application_id = ${APPLICATION_ID}`);
      db.pragma(`user_version = ${version}`);
    }).immediate();
  }
  return { from, to: SCHEMA_VERSION };
}
