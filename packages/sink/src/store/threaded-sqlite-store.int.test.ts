/**
 * The worker-thread SQLite store (the daemon's default) passes the same contract as the in-thread
 * store, and reports open failures (a newer schema) as the same SchemaVersionError.
 */
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SchemaVersionError } from '../errors.js';
import { describeFenceContract } from '../testing/contract.js';
import { tempDir } from '../testing/fixtures.js';
import { storeServiceTarget } from '../testing/store-service-target.js';
import { SCHEMA_VERSION } from './migrations.js';
import { ThreadedSqliteStore } from './threaded-sqlite-store.js';

describeFenceContract('in-process service over SQLite in a worker thread', async (options) => {
  const dir = tempDir();
  return storeServiceTarget(await ThreadedSqliteStore.open({ path: dir.file('sink.db') }), options, () => {
    dir.remove();
  });
});

describe('ThreadedSqliteStore', () => {
  it('rejects a newer schema with SchemaVersionError', async () => {
    const dir = tempDir();
    try {
      const db = new Database(dir.file('n.db'));
      db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
      db.close();
      await expect(ThreadedSqliteStore.open({ path: dir.file('n.db') })).rejects.toBeInstanceOf(SchemaVersionError);
    } finally {
      dir.remove();
    }
  });

  it('keeps fences across close and reopen, and refuses calls once closed', async () => {
    const dir = tempDir();
    try {
      const first = await ThreadedSqliteStore.open({ path: dir.file('r.db') });
      await first.applyBatch([{ kind: 'advance', resource: 'r', token: 7n }]);
      await first.close();
      expect(first.isOpen()).toBe(false);
      await expect(first.fenceOf('r')).rejects.toThrow(/closed/);
      const second = await ThreadedSqliteStore.open({ path: dir.file('r.db') });
      expect(await second.fenceOf('r')).toBe(7n);
      await second.close();
    } finally {
      dir.remove();
    }
  });
});
