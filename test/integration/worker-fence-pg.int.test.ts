/**
 * Fencing the user's own PostgreSQL from a handler: real etcd, a real coordinator, a PostgreSQL
 * sink and the user's table in the same real PostgreSQL, workers of the SDK in process.
 *
 * - `ctx.fencedTransaction(pool, fn)`: the handler moves money between two rows of the user's own
 *   table in one transaction with the fence check; the task completes with no sink write, and its
 *   result is what the transaction stored (the sink shows it: same `leasehold.results` table).
 * - A holder cut off past its lease (its transport frozen: no heartbeats, no pushes) is taken over;
 *   its late transaction with its grant proof (`fencedTransaction(pool, { ...ctx.grant, ... })` of
 *   `@leasehold/fence-pg`) is refused STALE_TOKEN, none of its writes commit, balances are exact.
 * - A holder cut off INSIDE its fenced transaction (row locks held, idle in transaction) does not
 *   block its own takeover past the lease: PostgreSQL ends the idle transaction after the lease's
 *   remaining time (the SDK sets `idle_in_transaction_session_timeout`), the takeover's advance goes
 *   through, the new holder moves the money once, the old holder's writes never commit.
 */
import { createSink, type Sink } from '@leasehold/sink';
import { SinkClient } from '@leasehold/sink-client';
import { fencedTransaction } from '@leasehold/fence-pg';
import { publicKeysOf } from '@leasehold/protocol';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import {
  webSocketTransport,
  Worker,
  type CoordinatorTransport,
  type SinkWriter,
  type TaskHandler,
  type TransportConnection,
} from '@leasehold/worker';
import type pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Stack, type AdminClient } from '../harness/coordinator.js';
import { closePool, startPostgres, testPool, type PostgresHandle } from '../harness/postgres.js';
import { waitFor } from '../harness/service.js';

const TTL_MS = 1_500;
const silent = pino({ level: process.env.LEASEHOLD_TEST_LOG_LEVEL ?? 'silent' });

let etcd: EtcdHandle;
let server: PostgresHandle;
let stack: Stack;
let sink: Sink;
let sinkUrl: string;
let sinkReader: SinkClient;
let admin: AdminClient;
let coordinatorUrl: string;
let pool: pg.Pool;
const workers: Worker<{ amount: number }, unknown>[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
  server = await startPostgres();
  stack = await Stack.start({ etcd, prefix: 'test/worker-fence-pg/', sessionTtlMs: TTL_MS });
  sink = await createSink(
    {
      host: '127.0.0.1',
      port: 0,
      dbPath: `${stack.dir}/unused.db`,
      synchronous: 'NORMAL',
      storeThread: false,
      decisionRetention: 0,
      bodyLimitBytes: 1024 * 1024,
      maxBatchOps: 2000,
      shutdownTimeoutMs: 2000,
      coordinatorKeys: [stack.keys.sinkKey],
      readKeys: [],
      capabilityPublicKeys: publicKeysOf(stack.keys.capability),
      store: 'postgres',
      databaseUrl: server.url,
    },
    { logger: silent, processMetrics: false },
  );
  sinkUrl = `http://127.0.0.1:${sink.address?.port ?? 0}`;
  sinkReader = new SinkClient({ url: sinkUrl, key: stack.keys.sinkKey });
  const coordinator = await stack.coordinator({ LEASEHOLD_COORDINATOR_SINK_URL: sinkUrl });
  coordinatorUrl = coordinator.url;
  admin = stack.admin(coordinatorUrl);
  pool = testPool(server.url, 8); // (its error listener: a client PostgreSQL ended, the idle timeout, while idle)
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.close({ graceMs: 200, forceMs: 200 })));
  await closePool(pool);
  void sinkReader.close();
  await stack.close();
  await sink.close();
  await server.stop();
  await etcd.stop();
});

beforeEach(async () => {
  await pool.query(
    'DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL);' +
      "INSERT INTO accounts VALUES ('alice', 100), ('bob', 0)",
  );
});

async function balances(): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ id: string; balance: string }>('SELECT id, balance::text FROM accounts');
  return Object.fromEntries(rows.map((r) => [r.id, Number(r.balance)]));
}

/** The user's transfer, as a handler would write it: two UPDATEs, the result says what was done. */
async function transfer(tx: pg.PoolClient, amount: number): Promise<{ moved: number }> {
  await tx.query("UPDATE accounts SET balance = balance - $1 WHERE id = 'alice'", [amount]);
  await tx.query("UPDATE accounts SET balance = balance + $1 WHERE id = 'bob'", [amount]);
  return { moved: amount };
}

/** A transport that can be cut off: while frozen, nothing is sent (requests time out) and pushes are dropped. */
class FreezableTransport implements CoordinatorTransport {
  frozen = false;
  connect(options: Parameters<CoordinatorTransport['connect']>[0]): Promise<TransportConnection> {
    if (this.frozen) return Promise.reject(new Error('frozen'));
    return webSocketTransport
      .connect({
        ...options,
        onPush: (m) => {
          if (!this.frozen) options.onPush(m);
        },
      })
      .then((conn) => ({
        url: conn.url,
        get isOpen() {
          return conn.isOpen;
        },
        request: (message, timeoutMs) =>
          this.frozen
            ? new Promise((_resolve, reject) =>
                setTimeout(() => {
                  reject(new Error('frozen'));
                }, timeoutMs),
              )
            : conn.request(message, timeoutMs),
        close: (code, reason) => {
          conn.close(code, reason);
        },
        terminate: () => {
          conn.terminate();
        },
        ...(conn.gone === undefined ? {} : { gone: conn.gone }),
      }));
  }
}

/** Counts the SDK's sink writes (there must be none for a task fenced in the user's database). */
class CountingSink implements SinkWriter {
  writes = 0;
  readonly #inner = new SinkClient({ url: sinkUrl });
  write(args: Parameters<SinkClient['write']>[0]): ReturnType<SinkClient['write']> {
    this.writes += 1;
    return this.#inner.write(args);
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}

function startWorkerWith(
  id: string,
  handler: TaskHandler<{ amount: number }, unknown>,
  extra: { transport?: CoordinatorTransport; sink?: SinkWriter } = {},
): Worker<{ amount: number }, unknown> {
  const w = new Worker<{ amount: number }, unknown>({
    coordinators: [coordinatorUrl],
    sink: extra.sink ?? { url: sinkUrl },
    credentials: { workerKey: stack.keys.workerKey },
    workerId: id,
    capabilityPublicKeys: publicKeysOf(stack.keys.capability),
    logger: silent,
    idleBackoffMs: 50,
    acquireWaitMs: 200,
    ...(extra.transport === undefined ? {} : { transport: extra.transport }),
    handler,
  });
  workers.push(w);
  void w.run();
  return w;
}

async function taskState(
  taskId: string,
): Promise<{ state: string; attempts: number; result?: { resultId: string; token: string } }> {
  return (await admin.task(taskId)).body as {
    state: string;
    attempts: number;
    result?: { resultId: string; token: string };
  };
}

describe('fence-pg from a handler', () => {
  it("ctx.fencedTransaction: the money moves in the user's transaction and the task completes with no sink write", async () => {
    const counting = new CountingSink();
    const w = startWorkerWith(
      'pg-1',
      async (task, ctx) => {
        const outcome = await ctx.fencedTransaction(pool, (tx) => transfer(tx, task.payload.amount));
        if (!outcome.ok) throw new Error(`refused: ${outcome.code}`);
      },
      { sink: counting },
    );
    await admin.submit('pg-t1', 'accounts/alice-bob', { amount: 30 });
    const done = await waitFor('completion', async () => {
      const t = await taskState('pg-t1');
      return t.state === 'completed' ? t : undefined;
    });
    expect(await balances()).toEqual({ alice: 70, bob: 30 });
    expect(counting.writes).toBe(0);
    expect(done.result?.resultId).toBe('task:pg-t1');
    // What the transaction stored is the task's result, at the sink too (one leasehold.results table).
    expect(await sinkReader.getResult('accounts/alice-bob', 'task:pg-t1')).toMatchObject({
      payload: { moved: 30 },
      workerId: 'pg-1',
      token: BigInt(done.result?.token ?? '0'),
    });
    await w.close(500);
  });

  it('a holder cut off past its lease is taken over; its late transaction with its grant proof is refused STALE_TOKEN', async () => {
    const cut = new FreezableTransport();
    let lateOutcome: unknown;
    let release!: () => void;
    const resumed = new Promise<void>((resolve) => (release = resolve));
    let granted = false;
    const a = startWorkerWith(
      'pg-a',
      async (task, ctx) => {
        granted = true;
        await resumed; // "paused": the test freezes A's link meanwhile
        // Straight to fence-pg with the grant's proof: no SDK deadline check in the way.
        lateOutcome = await fencedTransaction(
          pool,
          { ...ctx.grant, capabilityPublicKeys: publicKeysOf(stack.keys.capability) },
          (tx) => transfer(tx, task.payload.amount),
        );
      },
      { transport: cut },
    );
    await admin.submit('pg-t2', 'accounts/late', { amount: 40 });
    await waitFor('A to hold the task', () => granted);
    cut.frozen = true;
    const b = startWorkerWith('pg-b', async (task, ctx) => {
      const outcome = await ctx.fencedTransaction(pool, (tx) => transfer(tx, task.payload.amount));
      if (!outcome.ok) throw new Error(`refused: ${outcome.code}`);
    });
    await waitFor('B to complete the task', async () => (await taskState('pg-t2')).state === 'completed', 20_000);
    cut.frozen = false;
    release();
    await waitFor('A to try its late transaction', () => lateOutcome);
    expect(lateOutcome).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
    expect(await balances()).toEqual({ alice: 60, bob: 40 });
    const t = await taskState('pg-t2');
    expect(t).toMatchObject({ state: 'completed', attempts: 2 });
    expect(await sinkReader.getResult('accounts/late', 'task:pg-t2')).toMatchObject({ workerId: 'pg-b' });
    await Promise.all([a.close(200), b.close(500)]);
  });

  it('a holder cut off inside its fenced transaction does not hold the takeover past its lease', async () => {
    const cut = new FreezableTransport();
    let inside = false;
    let lateError: unknown;
    let release!: () => void;
    const resumed = new Promise<void>((resolve) => (release = resolve));
    const a = startWorkerWith(
      'pg-c',
      async (task, ctx) => {
        try {
          await ctx.fencedTransaction(pool, async (tx) => {
            await tx.query("UPDATE accounts SET balance = balance - $1 WHERE id = 'alice'", [task.payload.amount]);
            inside = true;
            await resumed; // idle in transaction, holding the fence row and alice's row
            await tx.query("UPDATE accounts SET balance = balance + $1 WHERE id = 'bob'", [task.payload.amount]);
            return { moved: task.payload.amount };
          });
        } catch (err) {
          lateError = err;
          throw err;
        }
      },
      { transport: cut },
    );
    await admin.submit('pg-t3', 'accounts/paused', { amount: 25 });
    await waitFor('A inside its transaction', () => inside);
    const cutAtMs = Date.now();
    cut.frozen = true;
    let grantedToBAtMs = 0;
    const b = startWorkerWith('pg-d', async (task, ctx) => {
      grantedToBAtMs ||= Date.now();
      const outcome = await ctx.fencedTransaction(pool, (tx) => transfer(tx, task.payload.amount));
      if (!outcome.ok) throw new Error(`refused: ${outcome.code}`);
    });
    await waitFor('B to complete the task', async () => (await taskState('pg-t3')).state === 'completed', 20_000);
    // The session expires one TTL after the cut; A's transaction was idle for at most A's remaining
    // lease when it began (≤ one TTL) — so the takeover's advance waited at most about one TTL more.
    expect(grantedToBAtMs - cutAtMs).toBeLessThan(2 * TTL_MS + 2_000);
    cut.frozen = false;
    release();
    await waitFor("A's transaction to fail", () => lateError);
    expect(await balances()).toEqual({ alice: 75, bob: 25 });
    expect(await sinkReader.getResult('accounts/paused', 'task:pg-t3')).toMatchObject({ workerId: 'pg-d' });
    await Promise.all([a.close(200), b.close(500)]);
  });
});
