/**
 * Faults of the PostgreSQL sink, with the built sink as real processes: two replicas on one
 * database, under concurrent advances and writes sent to either replica.
 *
 * 1. SIGKILL a random replica at random moments (22 times), restart it each time; after every
 *    restart the ledger checks (src/testing/crash-ledger.ts) hold: every acknowledged write present
 *    with its exact payload and decision, no fence back, nothing unacknowledged half-visible.
 * 2. Crash PostgreSQL itself (`pg_ctl stop -m immediate`) under load, three times: both replicas
 *    report /readyz 503 while it is down and refuse writes with 503 UNAVAILABLE (never a false ack),
 *    reconnect by themselves once it is back (/readyz 200, load flows again), and no acknowledged
 *    write or advance is lost.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../../test/harness/postgres.js';
import { waitFor } from '../../../test/harness/service.js';
import { SinkClient } from '@leasehold/sink-client';
import { drive, loadUntil, newLedger, verify, type Ledger } from './testing/crash-ledger.js';
import { COORDINATOR_KEY, INCARNATION, sign, tempDir, type TempDir } from './testing/fixtures.js';
import { spawnSink, type SpawnedSink } from './testing/spawn-sink.js';

const KILLS = 22;
const RESOURCES = ['pgcrash/a', 'pgcrash/b', 'pgcrash/c', 'pgcrash/d', 'pgcrash/e', 'pgcrash/f'];

let server: PostgresHandle;
let dir: TempDir;
beforeAll(async () => {
  server = await startPostgres();
  dir = tempDir('leasehold-pg-crash-');
});
afterAll(async () => {
  await server.stop();
  dir.remove();
});

interface Replica {
  sink: SpawnedSink;
  client: SinkClient;
}

async function startReplica(url: string): Promise<Replica> {
  const sink = await spawnSink({
    dir: dir.path,
    dbPath: dir.file('unused.db'),
    env: {
      LEASEHOLD_SINK_STORE: 'postgres',
      LEASEHOLD_SINK_DATABASE_URL: url,
      LEASEHOLD_SINK_DECISION_RETENTION: '0',
    },
  });
  return { sink, client: new SinkClient({ url: sink.url, key: COORDINATOR_KEY, timeoutMs: 3000, maxSockets: 32 }) };
}

async function stopReplica(replica: Replica): Promise<void> {
  void replica.client.close();
  replica.sink.kill('SIGKILL');
  await replica.sink.exited;
}

async function ready(replica: Replica): Promise<boolean> {
  return (await replica.client.health().catch(() => ({ ready: false }))).ready;
}

const loadFor = async (clients: SinkClient[], round: number, ledger: Ledger, ms: number) => {
  const ackedBefore = ledger.acked.size;
  const drivers = RESOURCES.map((r) => drive(clients, r, round, ledger));
  await loadUntil(ledger, ackedBefore, ms, 25);
  return drivers;
};

describe('PostgreSQL sink under faults', () => {
  it(
    `two replicas keep every acknowledged write and every fence across ${KILLS} SIGKILLs`,
    { timeout: 180_000 },
    async () => {
      const url = await server.createDatabase();
      const ledger = newLedger();
      const replicas = [await startReplica(url), await startReplica(url)];
      let killedWithWork = 0;
      try {
        for (let round = 0; round < KILLS; round++) {
          await verify(replicas[round % 2]!.client, ledger, RESOURCES);
          const ackedBefore = ledger.acked.size;
          const drivers = await loadFor(
            replicas.map((r) => r.client),
            round,
            ledger,
            60 + Math.random() * 240,
          );
          const victim = Math.floor(Math.random() * 2);
          replicas[victim]!.sink.kill('SIGKILL');
          expect((await replicas[victim]!.sink.exited).signal).toBe('SIGKILL');
          await Promise.all(drivers);
          if (ledger.acked.size > ackedBefore) killedWithWork++;
          void replicas[victim]!.client.close();
          replicas[victim] = await startReplica(url);
        }
        for (const r of replicas) await verify(r.client, ledger, RESOURCES);
      } finally {
        await Promise.all(replicas.map(stopReplica));
      }
      expect(killedWithWork).toBeGreaterThanOrEqual(KILLS - 2);
      expect(ledger.acked.size).toBeGreaterThan(KILLS * 20);
      expect(ledger.unknown.size).toBeGreaterThan(0);
    },
  );

  it.skipIf(process.env.LEASEHOLD_PG_URL !== undefined && process.env.LEASEHOLD_PG_URL !== '')(
    'survives PostgreSQL crashes under load: /readyz 503 while down, reconnects, no acknowledged write lost',
    { timeout: 90_000 },
    async () => {
      const url = await server.createDatabase();
      const ledger = newLedger();
      const replicas = [await startReplica(url), await startReplica(url)];
      const clients = replicas.map((r) => r.client);
      try {
        for (let round = 0; round < 3; round++) {
          await waitFor('both replicas ready', async () => (await ready(replicas[0]!)) && (await ready(replicas[1]!)));
          const ackedBefore = ledger.acked.size;
          const drivers = await loadFor(clients, round, ledger, 300);
          await server.stopImmediate();
          await Promise.all(drivers);
          expect(ledger.acked.size).toBeGreaterThan(ackedBefore);
          // Down: not ready, and a write is refused as UNAVAILABLE, never acknowledged.
          for (const r of replicas) await waitFor('/readyz 503 while postgres is down', async () => !(await ready(r)));
          const resource = RESOURCES[0]!;
          const token = ledger.ackedFence.get(resource) ?? 1n;
          await expect(
            replicas[round % 2]!.client.write({
              resource,
              token,
              resultId: `while-down-${round}`,
              workerId: 'down',
              incarnation: INCARNATION,
              capability: sign(resource, token, 'down'),
              payload: { round },
            }),
          ).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
          await server.start();
          await waitFor('/readyz 200 after postgres is back', async () =>
            (await Promise.all(replicas.map(ready))).every(Boolean),
          ).catch((err: unknown) => {
            throw new Error(`${String(err)}\n${replicas.map((r) => r.sink.output()).join('\n')}`);
          });
          await verify(replicas[round % 2]!.client, ledger, RESOURCES);
          expect(await replicas[0]!.client.getResult(resource, `while-down-${round}`)).toBeUndefined();
        }
        // And the load flows again through both.
        const ackedBefore = ledger.acked.size;
        await Promise.all(RESOURCES.map((r) => drive(clients, r, 99, ledger, Date.now() + 300)));
        for (const r of replicas) await verify(r.client, ledger, RESOURCES);
        expect(ledger.acked.size).toBeGreaterThan(ackedBefore);
      } finally {
        if (server.canRestart) await server.start();
        await Promise.all(replicas.map(stopReplica));
      }
    },
  );
});
