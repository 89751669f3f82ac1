/**
 * PostgresFenceStore against a real PostgreSQL (test/harness/postgres.ts): the fence contract
 * in-process, through the HTTP app and through the HTTP client against a listening sink; then what
 * is particular to PostgreSQL: session durability settings, migrations (newer / foreign schema
 * refused, concurrent start-up), exact int64 tokens, a deadlock retried with the exact answer,
 * retention, and fences surviving a reopen.
 */
import { FENCE_SCHEMA_VERSION } from '@leasehold/fence-pg';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../../../test/harness/postgres.js';
import { waitFor } from '../../../../test/harness/service.js';
import { SinkClient } from '@leasehold/sink-client';
import { SchemaVersionError } from '../errors.js';
import { FencedService } from '../service/fenced-service.js';
import { createSink } from '../sink.js';
import { describeFenceContract } from '../testing/contract.js';
import { COORDINATOR_KEY, tempDir, testOptions } from '../testing/fixtures.js';
import { storeServiceTarget } from '../testing/store-service-target.js';
import { clientTarget, injectTarget } from '../testing/targets.js';
import { PostgresFenceStore } from './postgres-store.js';

const silent = pino({ level: 'silent' });
let server: PostgresHandle;

beforeAll(async () => {
  server = await startPostgres();
});
afterAll(async () => {
  await server.stop();
});

async function freshStore(options: Partial<Parameters<typeof PostgresFenceStore.open>[0]> = {}) {
  await server.resetSchema();
  return PostgresFenceStore.open({ url: server.url, ...options });
}

describeFenceContract('in-process service over PostgreSQL', async (options) =>
  storeServiceTarget(await freshStore(), options),
);

describeFenceContract('HTTP app (inject) over PostgreSQL', (options) => injectTarget(options, () => freshStore()));

describeFenceContract('HTTP client against a listening sink over PostgreSQL', async (options) => {
  await server.resetSchema();
  const dir = tempDir();
  const sink = await createSink(
    testOptions(dir.file('unused.db'), { store: 'postgres', databaseUrl: server.url, databasePoolSize: 4, ...options }),
    { logger: silent, processMetrics: false },
  );
  const client = new SinkClient({ url: `http://127.0.0.1:${sink.address?.port ?? 0}`, key: COORDINATOR_KEY });
  return clientTarget(client, async () => {
    void client.close();
    await sink.close();
    dir.remove();
  });
});

async function query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = [], url = server.url) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

describe('PostgresFenceStore', () => {
  beforeEach(async () => {
    await server.resetSchema();
  });

  it('runs every session with synchronous_commit=on, even when the URL asks for off', async () => {
    const url = new URL(server.url);
    url.searchParams.set('options', '-c synchronous_commit=off');
    const store = await PostgresFenceStore.open({ url: url.toString() });
    try {
      expect(await store.settings()).toMatchObject({ synchronousCommit: 'on', fsync: 'on' });
    } finally {
      await store.close();
    }
  });

  it('refuses a schema of a newer version and leaves it untouched', async () => {
    const store = await freshStore();
    await store.close();
    await query('UPDATE leasehold.schema_version SET version = version + 1');
    const opening = PostgresFenceStore.open({ url: server.url });
    await expect(opening).rejects.toBeInstanceOf(SchemaVersionError);
    await expect(PostgresFenceStore.open({ url: server.url })).rejects.toThrow(/newer than this build supports/);
    expect(await query<{ version: number }>('SELECT version FROM leasehold.schema_version')).toEqual([
      { version: FENCE_SCHEMA_VERSION + 1 },
    ]);
  });

  it('migrates a version-1 schema: its results get a seq and page in one walk', async () => {
    const store = await freshStore();
    await store.applyBatch([{ kind: 'advance', resource: 'old/r', token: 2n }]);
    await store.close();
    // Back to version 1 (no seq), with results stored by an old sink.
    await query('ALTER TABLE leasehold.results DROP COLUMN seq; UPDATE leasehold.schema_version SET version = 1');
    await query(
      `INSERT INTO leasehold.results (resource, result_id, token, worker_id, payload, written_at_ms)
       SELECT 'old/r', 'r-' || i, 2, 'w', i::text, 1 FROM generate_series(1, 7) AS i`,
    );
    const upgraded = await PostgresFenceStore.open({ url: server.url });
    try {
      const service = new FencedService({ store: upgraded, logger: silent });
      const first = await service.resourcePage('old/r', { limit: 4 });
      const second = await service.resourcePage('old/r', { after: first.next, limit: 4 });
      expect([...first.results, ...second.results].map((r) => r.resultId).sort()).toEqual(
        ['r-1', 'r-2', 'r-3', 'r-4', 'r-5', 'r-6', 'r-7'].sort(),
      );
      expect([first.hasMore, second.hasMore]).toEqual([true, false]);
      // New results come after the migrated ones.
      await upgraded.applyBatch([
        { kind: 'write', resource: 'old/r', token: 2n, resultId: 'new', workerId: 'w', payload: '1' },
      ]);
      expect((await service.resourcePage('old/r', { after: second.next })).results.map((r) => r.resultId)).toEqual([
        'new',
      ]);
      expect(await query('SELECT version FROM leasehold.schema_version')).toEqual([{ version: FENCE_SCHEMA_VERSION }]);
    } finally {
      await upgraded.close();
    }
  });

  it('refuses a "leasehold" schema that is not ours', async () => {
    await query('CREATE SCHEMA leasehold; CREATE TABLE leasehold.accounts (id int)');
    await expect(PostgresFenceStore.open({ url: server.url })).rejects.toThrow(/without a leasehold schema_version/);
    expect(await query('SELECT * FROM leasehold.accounts')).toEqual([]);
  });

  it('migrates once when several replicas start at the same moment', async () => {
    const stores = await Promise.all(Array.from({ length: 4 }, () => PostgresFenceStore.open({ url: server.url })));
    try {
      const [first] = await stores[0]!.applyBatch([{ kind: 'advance', resource: 'r', token: 3n }]);
      expect(first).toEqual({ ok: true, outcome: 'advanced', fence: 3n });
      for (const s of stores) expect(await s.fenceOf('r')).toBe(3n);
      expect(await query('SELECT application, version FROM leasehold.schema_version')).toEqual([
        { application: 'leasehold-fence', version: FENCE_SCHEMA_VERSION },
      ]);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('stores tokens up to int64 max exactly', async () => {
    const store = await freshStore();
    try {
      const max = 9_223_372_036_854_775_807n;
      await store.applyBatch([{ kind: 'advance', resource: 'r', token: max - 1n }]);
      const [d] = await store.applyBatch([
        { kind: 'advance', resource: 'r', token: max },
        { kind: 'write', resource: 'r', token: max, resultId: 'x', workerId: 'w', payload: '1' },
      ]);
      expect(d).toEqual({ ok: true, outcome: 'advanced', fence: max });
      expect(await store.fenceOf('r')).toBe(max);
      expect((await store.resultOf('r', 'x'))?.token).toBe(max);
      const page = await store.decisions(0, 10);
      expect(page.decisions.map((x) => x.fenceBefore)).toEqual([0n, max - 1n, max]);
    } finally {
      await store.close();
    }
  });

  it('keeps fences, results and the decision log across close and reopen; the old holder is refused', async () => {
    const first = await freshStore();
    await first.applyBatch([
      { kind: 'advance', resource: 'r', token: 1n },
      { kind: 'write', resource: 'r', token: 1n, resultId: 'x', workerId: 'a', payload: '{"v":1}' },
      { kind: 'advance', resource: 'r', token: 2n },
    ]);
    await first.close();
    const second = await PostgresFenceStore.open({ url: server.url });
    try {
      const [stale] = await second.applyBatch([
        { kind: 'write', resource: 'r', token: 1n, resultId: 'y', workerId: 'a', payload: '1' },
      ]);
      expect(stale).toEqual({ ok: false, code: 'STALE_TOKEN', fence: 2n });
      expect((await second.resultOf('r', 'x'))?.payload).toBe('{"v":1}');
      expect((await second.decisions(0, 10)).decisions.map((d) => d.outcome)).toEqual([
        'advanced',
        'written',
        'advanced',
        'STALE_TOKEN',
      ]);
    } finally {
      await second.close();
    }
  });

  it('runs a batch again after a deadlock and still gives the sequential answers', async () => {
    // PostgreSQL checks for a deadlock once, deadlock_timeout after a session starts waiting. The
    // store waits first (1.5 s timeout), the blocker joins the cycle well within that and would
    // check only after 10 s: the store's session is the one aborted.
    const url = new URL(server.url);
    url.searchParams.set('options', '-c deadlock_timeout=1500ms');
    const retries: string[] = [];
    const store = await PostgresFenceStore.open({ url: url.toString(), onRetry: ({ code }) => retries.push(code) });
    const blocker = new pg.Client({ connectionString: server.url });
    await blocker.connect();
    try {
      await store.applyBatch([
        { kind: 'advance', resource: 'a', token: 1n },
        { kind: 'advance', resource: 'b', token: 1n },
      ]);
      await blocker.query("SET deadlock_timeout = '10s'");
      await blocker.query('BEGIN');
      await blocker.query("SELECT fence FROM leasehold.fences WHERE resource = 'b' FOR UPDATE");
      // The store locks a, then waits for b (held by the blocker).
      const batch = store.applyBatch([
        { kind: 'advance', resource: 'a', token: 2n },
        { kind: 'advance', resource: 'b', token: 2n },
        { kind: 'write', resource: 'b', token: 2n, resultId: 'x', workerId: 'w', payload: '"v"' },
      ]);
      await waitFor('the store session waiting on a lock (pg_stat_activity)', async () => {
        const rows = await query<{ n: string }>(
          "SELECT count(*)::text AS n FROM pg_stat_activity WHERE application_name = 'leasehold-sink' AND wait_event_type = 'Lock'",
        );
        return rows[0]?.n === '1';
      });
      // Now the blocker wants a (held by the store): a deadlock; the store's session is aborted,
      // so the blocker gets a, commits, and the store runs its batch again from fresh reads.
      await blocker.query("UPDATE leasehold.fences SET fence = 5 WHERE resource = 'a'");
      await blocker.query('COMMIT');
      expect(await batch).toEqual([
        { ok: false, code: 'STALE_TOKEN', fence: 5n },
        { ok: true, outcome: 'advanced', fence: 2n },
        { ok: true, outcome: 'written', fence: 2n },
      ]);
      expect(retries).toContain('40P01');
    } finally {
      await blocker.end();
      await store.close();
    }
  });

  it('a fence row held by another session past lockTimeoutMs: the batch rolls back UNAVAILABLE, others go on', async () => {
    // statement_timeout 10 s: without the lock bound the batch would wait that long and fail with
    // a statement timeout (57014, not UNAVAILABLE), well after this test's expectations.
    const store = await freshStore({ lockTimeoutMs: 300, statementTimeoutMs: 10_000 });
    const holder = new pg.Client({ connectionString: server.url });
    await holder.connect();
    try {
      await store.applyBatch([
        { kind: 'advance', resource: 'held', token: 1n },
        { kind: 'advance', resource: 'free', token: 1n },
      ]);
      await holder.query('BEGIN');
      await holder.query("SELECT fence FROM leasehold.fences WHERE resource = 'held' FOR UPDATE");
      const blocked = store.applyBatch([
        { kind: 'advance', resource: 'free', token: 2n },
        { kind: 'advance', resource: 'held', token: 2n },
      ]);
      // A batch of other resources is not held by it (the store runs batches side by side).
      expect(await store.applyBatch([{ kind: 'advance', resource: 'other', token: 1n }])).toEqual([
        { ok: true, outcome: 'advanced', fence: 1n },
      ]);
      await expect(blocked).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
      expect(store.isOpen()).toBe(true);
      // Nothing of the batch was applied; once the row is free the same batch goes through.
      expect([await store.fenceOf('free'), await store.fenceOf('held')]).toEqual([1n, 1n]);
      await holder.query('COMMIT');
      expect(
        await store.applyBatch([
          { kind: 'advance', resource: 'free', token: 2n },
          { kind: 'advance', resource: 'held', token: 2n },
        ]),
      ).toEqual([
        { ok: true, outcome: 'advanced', fence: 2n },
        { ok: true, outcome: 'advanced', fence: 2n },
      ]);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it('prunes the decision log beyond the retention window and never reuses sequence numbers', async () => {
    const store = await freshStore({ decisionRetention: 10 });
    try {
      for (let t = 1n; t <= 40n; t++) await store.applyBatch([{ kind: 'advance', resource: 'r', token: t }]);
      // The prune is a DELETE the store sends after the batch, without awaiting it: wait for its rows to go.
      await waitFor(
        'the decision log pruned to the retention window',
        async () => (await store.decisions(0, 100)).decisions.length <= 12,
        10_000,
      );
      const page = await store.decisions(0, 100);
      expect(page.decisions.at(-1)?.seq).toBe(40);
      expect(page.oldestRetained).toBe(page.decisions[0]?.seq);
      await store.applyBatch([{ kind: 'advance', resource: 'r', token: 41n }]);
      expect((await store.decisions(40, 10)).decisions.map((d) => d.seq)).toEqual([41]);
    } finally {
      await store.close();
    }
  });
});
