import Database from 'better-sqlite3';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaseholdError } from '../errors.js';
import { FencedService } from '../service/fenced-service.js';
import { describeFenceContract } from '../testing/contract.js';
import { tempDir, type TempDir } from '../testing/fixtures.js';
import { storeServiceTarget } from '../testing/store-service-target.js';
import { APPLICATION_ID, SCHEMA_VERSION } from './migrations.js';
import { SqliteFenceStore } from './sqlite-store.js';
import { SchemaVersionError } from '../errors.js';

const silent = pino({ level: 'silent' });

describeFenceContract('in-process service over SQLite', (options) => {
  const dir = tempDir();
  return Promise.resolve(
    storeServiceTarget(new SqliteFenceStore({ path: dir.file('sink.db') }), options, () => {
      dir.remove();
    }),
  );
});

describe('SqliteFenceStore', () => {
  let dir: TempDir;
  beforeEach(() => {
    dir = tempDir();
  });
  afterEach(() => {
    dir.remove();
  });

  it('opens in WAL mode with synchronous=FULL by default and stamps schema version and application id', async () => {
    const store = new SqliteFenceStore({ path: dir.file('a.db') });
    expect(store.settings()).toEqual({ journalMode: 'wal', synchronous: 'FULL' });
    await store.close();
    const normal = new SqliteFenceStore({ path: dir.file('a.db'), synchronous: 'NORMAL' });
    expect(normal.settings().synchronous).toBe('NORMAL');
    await normal.close();
    const db = new Database(dir.file('a.db'), { readonly: true });
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    expect(db.pragma('application_id', { simple: true })).toBe(APPLICATION_ID);
    db.close();
  });

  it('keeps fences, results and the decision log across close and reopen (design note case 5)', async () => {
    const path = dir.file('b.db');
    const first = new SqliteFenceStore({ path });
    await first.applyBatch([
      { kind: 'advance', resource: 'r', token: 1n },
      { kind: 'write', resource: 'r', token: 1n, resultId: 'x', workerId: 'a', payload: '{"v":1}' },
      { kind: 'advance', resource: 'r', token: 2n },
    ]);
    await first.close();

    const second = new SqliteFenceStore({ path });
    expect(await second.fenceOf('r')).toBe(2n);
    // The old holder's write is refused after the restart: the fence did not reset.
    const [stale] = await second.applyBatch([
      { kind: 'write', resource: 'r', token: 1n, resultId: 'y', workerId: 'a', payload: '1' },
    ]);
    expect(stale).toEqual({ ok: false, code: 'STALE_TOKEN', fence: 2n });
    expect((await second.resultOf('r', 'x'))?.payload).toBe('{"v":1}');
    const page = await second.decisions(0, 10);
    expect(page.decisions.map((d) => d.seq)).toEqual([1, 2, 3, 4]);
    await second.close();
  });

  it('stores tokens up to int64 max exactly', async () => {
    const store = new SqliteFenceStore({ path: ':memory:' });
    const max = 9_223_372_036_854_775_807n;
    await store.applyBatch([{ kind: 'advance', resource: 'r', token: max - 1n }]);
    const [d] = await store.applyBatch([{ kind: 'advance', resource: 'r', token: max }]);
    expect(d).toEqual({ ok: true, outcome: 'advanced', fence: max });
    expect(await store.fenceOf('r')).toBe(max);
    const page = await store.decisions(0, 10);
    expect(page.decisions[1]?.fenceBefore).toBe(max - 1n);
    await store.close();
  });

  it('refuses a database written by a newer schema version and leaves it untouched', async () => {
    const path = dir.file('newer.db');
    const store = new SqliteFenceStore({ path });
    await store.close();
    const db = new Database(path);
    db.pragma(`user_version = ${SCHEMA_VERSION + 1}`);
    db.close();
    expect(() => new SqliteFenceStore({ path })).toThrow(SchemaVersionError);
    expect(() => new SqliteFenceStore({ path })).toThrow(/newer than this build supports/);
    const check = new Database(path, { readonly: true });
    expect(check.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION + 1);
    check.close();
  });

  it('migrates a version-1 database: results keep their stored order, get a seq, and VACUUM keeps it', async () => {
    const path = dir.file('v1.db');
    const v1 = new Database(path);
    // Version 1 as it was shipped: results keyed by (resource, result_id) with an implicit rowid.
    v1.exec(`
      CREATE TABLE fences (resource TEXT PRIMARY KEY, fence INTEGER NOT NULL CHECK (fence >= 0)) WITHOUT ROWID;
      CREATE TABLE results (resource TEXT NOT NULL, result_id TEXT NOT NULL, token INTEGER NOT NULL CHECK (token >= 1),
        worker_id TEXT NOT NULL, payload TEXT NOT NULL, written_at_ms INTEGER NOT NULL, PRIMARY KEY (resource, result_id));
      CREATE TABLE decisions (seq INTEGER PRIMARY KEY, kind TEXT NOT NULL CHECK (kind IN ('advance', 'write')),
        resource TEXT NOT NULL, token INTEGER NOT NULL, fence_before INTEGER NOT NULL, outcome TEXT NOT NULL,
        result_id TEXT, worker_id TEXT, at_ms INTEGER NOT NULL);
      INSERT INTO fences VALUES ('r', 3);
      INSERT INTO results VALUES ('r', 'm', 3, 'w', '"m"', 1), ('r', 'b', 3, 'w', '"b"', 2), ('r', 'x', 3, 'w', '"x"', 3);
    `);
    v1.pragma(`application_id = ${APPLICATION_ID}`);
    v1.pragma('user_version = 1');
    v1.close();
    const store = new SqliteFenceStore({ path });
    const page = async (after: bigint) => store.resourcePage('r', { after, limit: 2, maxBytes: 1 << 20 });
    const first = await page(0n);
    expect(first.results.map((r) => r.resultId)).toEqual(['m', 'b']);
    await store.applyBatch([{ kind: 'write', resource: 'r', token: 3n, resultId: 'a', workerId: 'w', payload: '"a"' }]);
    const second = await page(first.next);
    expect(second.results.map((r) => r.resultId)).toEqual(['x', 'a']);
    expect(second.hasMore).toBe(false);
    await store.close();
    const raw = new Database(path);
    raw.exec('VACUUM');
    expect(raw.pragma('user_version', { simple: true })).toBe(SCHEMA_VERSION);
    raw.close();
    const reopened = new SqliteFenceStore({ path });
    const again = await reopened.resourcePage('r', { after: first.next, limit: 2, maxBytes: 1 << 20 });
    expect(again.results.map((r) => [r.seq, r.resultId])).toEqual(second.results.map((r) => [r.seq, r.resultId]));
    // The unique key still holds: the same result id again is a replay, not a second row.
    const [replay] = await reopened.applyBatch([
      { kind: 'write', resource: 'r', token: 3n, resultId: 'm', workerId: 'w', payload: '"m"' },
    ]);
    expect(replay).toEqual({ ok: true, outcome: 'replayed', fence: 3n });
    await reopened.close();
  });

  it('a page reads by the (resource, seq) index: a range scan, no full scan, no sort', async () => {
    const path = dir.file('plan.db');
    await new SqliteFenceStore({ path }).close();
    const db = new Database(path, { readonly: true });
    const plan = (sql: string) =>
      db
        .prepare<[], { detail: string }>(`EXPLAIN QUERY PLAN ${sql}`)
        .all()
        .map((r) => r.detail)
        .join('; ');
    // The two statements of resourcePage.
    for (const sql of [
      "SELECT seq, octet_length(payload) FROM results WHERE resource = 'r' AND seq > 5 ORDER BY seq LIMIT 10",
      "SELECT * FROM results WHERE resource = 'r' AND seq > 5 AND seq <= 9 ORDER BY seq",
    ]) {
      const detail = plan(sql);
      expect(detail, sql).toMatch(/^SEARCH results USING (COVERING )?INDEX results_by_seq \(resource=\? AND seq>\?/);
      expect(detail, sql).not.toMatch(/TEMP B-TREE|SCAN/);
    }
    db.close();
  });

  it('refuses a SQLite file of another application', () => {
    const path = dir.file('other.db');
    const db = new Database(path);
    db.pragma('application_id = 42');
    db.close();
    expect(() => new SqliteFenceStore({ path })).toThrow(/not a leasehold sink database/);
  });

  it('prunes the decision log beyond the retention window and never reuses sequence numbers', async () => {
    const path = dir.file('ret.db');
    const store = new SqliteFenceStore({ path, decisionRetention: 10 });
    for (let t = 1n; t <= 40n; t++) await store.applyBatch([{ kind: 'advance', resource: 'r', token: t }]);
    const page = await store.decisions(0, 100);
    expect(page.decisions.length).toBeGreaterThanOrEqual(10);
    expect(page.decisions.length).toBeLessThanOrEqual(11);
    expect(page.decisions.at(-1)?.seq).toBe(40);
    expect(page.oldestRetained).toBe(page.decisions[0]?.seq);
    await store.close();
    const reopened = new SqliteFenceStore({ path, decisionRetention: 10 });
    await reopened.applyBatch([{ kind: 'advance', resource: 'r', token: 41n }]);
    expect((await reopened.decisions(40, 10)).decisions.map((d) => d.seq)).toEqual([41]);
    await reopened.close();
  });

  it('rolls a failed batch back completely: no fence, result or decision of it is visible', async () => {
    const path = dir.file('fail.db');
    const store = new SqliteFenceStore({ path });
    const saboteur = new Database(path);
    saboteur.exec(
      "CREATE TRIGGER boom BEFORE INSERT ON results WHEN NEW.result_id = 'boom' BEGIN SELECT RAISE(ABORT, 'disk says no'); END",
    );
    saboteur.close();
    const service = new FencedService({ store, logger: silent });
    const answers = await Promise.allSettled([
      service.advance({ resource: 'r', token: 1n }),
      service.write({ resource: 'r', token: 1n, resultId: 'ok', workerId: 'w', payload: 1 }),
      service.write({ resource: 'r', token: 1n, resultId: 'boom', workerId: 'w', payload: 2 }),
    ]);
    for (const a of answers) {
      expect(a.status).toBe('rejected');
      const reason = (a as PromiseRejectedResult).reason as LeaseholdError;
      expect(reason).toBeInstanceOf(LeaseholdError);
      expect(reason.code).toBe('UNAVAILABLE');
      expect(reason.retryable).toBe(true);
    }
    expect(await store.fenceOf('r')).toBe(0n);
    expect(await store.resultOf('r', 'ok')).toBeUndefined();
    expect((await store.decisions(0, 10)).decisions).toEqual([]);
    // The next batch works normally.
    expect(await service.advance({ resource: 'r', token: 1n })).toEqual({ ok: true, outcome: 'advanced', fence: 1n });
    await service.close();
    await store.close();
  });
});
