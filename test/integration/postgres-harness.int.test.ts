/**
 * The test pool of the PostgreSQL harness ends completely: after `closePool` no backend of it is
 * left, so a database dropped `WITH (FORCE)` (what the handle's `stop()` does) right after sends no
 * FATAL 57P01 to a closing connection — which a bare `pg.Pool` re-emits as an uncaught 'error' and
 * so fails a test file whose tests all passed (seen in CI: fenced-transaction.int.test.ts).
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { closePool, startPostgres, testPool, type PostgresHandle } from '../harness/postgres.js';

let server: PostgresHandle;
let admin: pg.Client;

beforeAll(async () => {
  server = await startPostgres();
  admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
});
afterAll(async () => {
  await admin.end();
  await server.stop();
});

/** The uncaught exceptions of this process while `run` runs. */
async function uncaughtDuring(run: () => Promise<void>): Promise<unknown[]> {
  const uncaught: unknown[] = [];
  const onUncaught = (err: unknown) => uncaught.push(err);
  process.on('uncaughtException', onUncaught);
  try {
    await run();
  } finally {
    process.off('uncaughtException', onUncaught);
  }
  return uncaught;
}

it('closePool leaves no backend behind, and a forced drop right after raises nothing', async () => {
  const uncaught = await uncaughtDuring(async () => {
    for (let round = 0; round < 8; round++) {
      const url = await server.createDatabase();
      const database = new URL(url).pathname.slice(1);
      const pool = testPool(url, 8);
      await Promise.all(Array.from({ length: 8 }, () => pool.query('SELECT pg_sleep(0.01)')));
      await closePool(pool);
      const { rows } = await admin.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1',
        [database],
      );
      expect(rows[0]!.n, `round ${round}: backends of the closed pool`).toBe(0);
      await admin.query(`DROP DATABASE ${database} WITH (FORCE)`);
    }
    // A late error would arrive as the dropped backends' last message: one more round trip after it.
    await admin.query('SELECT 1');
  });
  expect(uncaught).toEqual([]);
});

it("a test pool takes an idle client's end by the server (57P01) without an uncaught error", async () => {
  const uncaught = await uncaughtDuring(async () => {
    const url = await server.createDatabase();
    const database = new URL(url).pathname.slice(1);
    const pool = testPool(url, 4);
    await Promise.all(Array.from({ length: 4 }, () => pool.query('SELECT pg_sleep(0.01)')));
    await admin.query(`DROP DATABASE ${database} WITH (FORCE)`); // ends the pool's idle backends
    await closePool(pool);
    await admin.query('SELECT 1');
  });
  expect(uncaught).toEqual([]);
});
