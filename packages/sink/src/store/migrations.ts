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
