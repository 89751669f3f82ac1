/**
 * `fencedTransaction` (@leasehold/fence-pg) in the user's own PostgreSQL, with the fences advanced
 * the way the coordinator advances them: through sink replicas (`PostgresFenceStore`) on the same
 * database. The worked example of docs/fence-pg: an account balance updated by workers.
 */
import { fencedTransaction, type FencedTransactionOutcome } from '@leasehold/fence-pg';
import { randomBytes } from 'node:crypto';
import {
  generateCapabilitySeed,
  parseCapabilityPublicKeys,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  signCapability,
  type JsonValue,
} from '@leasehold/protocol';
import { PostgresFenceStore } from '@leasehold/sink';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { closePool, startPostgres, testPool, type PostgresHandle } from '../harness/postgres.js';
import { waitFor } from '../harness/service.js';

/** The coordinator's signing key: only the grants below are signed with it. */
const KEY = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
/** What the process calling fencedTransaction holds: the public key, nothing that signs. */
const PUBLIC_KEYS = parseCapabilityPublicKeys(publicKeyEntryOf(KEY));
const ACCOUNT = 'account/alice';

let server: PostgresHandle;
let pool: pg.Pool;
let sinks: PostgresFenceStore[];

beforeAll(async () => {
  server = await startPostgres();
});
afterAll(async () => {
  await server.stop();
});
beforeEach(async () => {
  await server.resetSchema();
  pool = testPool(server.url, 12);
  await pool.query(
    'DROP TABLE IF EXISTS accounts; CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL)',
  );
  await pool.query("INSERT INTO accounts VALUES ('alice', 100)");
  // Two sink replicas on the same database: the coordinator advances fences through them.
  sinks = await Promise.all([0, 1].map(() => PostgresFenceStore.open({ url: server.url })));
});
afterEach(async () => {
  await Promise.all(sinks.map((s) => s.close()));
  await closePool(pool);
});

async function advance(token: bigint, replica = 0): Promise<void> {
  const [d] = await sinks[replica]!.applyBatch([{ kind: 'advance', resource: ACCOUNT, token }]);
  expect(d?.ok).toBe(true);
}

async function balance(): Promise<bigint> {
  const { rows } = await pool.query<{ balance: string }>(
    "SELECT balance::text AS balance FROM accounts WHERE id = 'alice'",
  );
  return BigInt(rows[0]!.balance);
}

/** A worker's deposit: its own UPDATE, inside the fenced transaction; the result is what it did. */
function deposit(
  token: bigint,
  amount: number,
  resultId: string | undefined,
  workerId = 'worker-a',
): Promise<FencedTransactionOutcome<JsonValue>> {
  const incarnation = `${workerId}-1`;
  return fencedTransaction(
    pool,
    {
      resource: ACCOUNT,
      token,
      workerId,
      incarnation,
      capability: signCapability(KEY, { resource: ACCOUNT, token, workerId, incarnation }),
      capabilityPublicKeys: PUBLIC_KEYS,
      ...(resultId === undefined ? {} : { resultId }),
    },
    async (client) => {
      await client.query("UPDATE accounts SET balance = balance + $1 WHERE id = 'alice'", [amount]);
      return { deposited: amount };
    },
  );
}

describe('fencedTransaction', () => {
  it('the worked example: a stale holder is refused after a takeover and the balance stays exact', async () => {
    await advance(7n);
    expect(await deposit(7n, 50, 'task:dep-1')).toEqual({
      ok: true,
      outcome: 'written',
      fence: 7n,
      result: { deposited: 50 },
    });
    // Worker A pauses; the coordinator hands the account to B: the fence moves to 9 (other replica).
    await advance(9n, 1);
    expect(await deposit(9n, 30, 'task:dep-2', 'worker-b')).toMatchObject({ ok: true, outcome: 'written' });
    // A wakes up and submits its old work: refused, and its UPDATE is rolled back.
    expect(await deposit(7n, 50, 'task:dep-3')).toEqual({ ok: false, code: 'STALE_TOKEN', fence: 9n });
    // B retries dep-2 after an ambiguous failure: replayed, not credited twice.
    expect(await deposit(9n, 30, 'task:dep-2', 'worker-b')).toEqual({
      ok: true,
      outcome: 'replayed',
      fence: 9n,
      result: { deposited: 30 },
    });
    expect(await balance()).toBe(180n);
    const log = await sinks[0]!.decisions(0, 100);
    expect(log.decisions.map((d) => [d.kind, d.token, d.outcome, d.resultId])).toEqual([
      ['advance', 7n, 'advanced', undefined],
      ['write', 7n, 'written', 'task:dep-1'],
      ['advance', 9n, 'advanced', undefined],
      ['write', 9n, 'written', 'task:dep-2'],
      ['write', 7n, 'STALE_TOKEN', 'task:dep-3'],
      ['write', 9n, 'replayed', 'task:dep-2'],
    ]);
    // The result is stored where the sink stores results: readable through the sink.
    expect((await sinks[1]!.resultOf(ACCOUNT, 'task:dep-1'))?.payload).toBe('{"deposited":50}');
  });

  it('same result id with a different result is RESULT_CONFLICT and commits none of the writes', async () => {
    await advance(3n);
    await deposit(3n, 10, 'task:x');
    expect(await deposit(3n, 11, 'task:x')).toEqual({ ok: false, code: 'RESULT_CONFLICT', fence: 3n });
    expect(await balance()).toBe(110n);
  });

  it('keeps quotes and backslashes in ids as data (the statements carry escaped literals)', async () => {
    await advance(3n);
    const odd = "task:it's \\ odd'); DROP TABLE accounts; --";
    expect(await deposit(3n, 5, odd)).toMatchObject({ ok: true, outcome: 'written' });
    expect(await deposit(3n, 5, odd)).toMatchObject({ ok: true, outcome: 'replayed' });
    expect((await sinks[0]!.resultOf(ACCOUNT, odd))?.payload).toBe('{"deposited":5}');
    expect(await balance()).toBe(105n);
  });

  it('a token above the fence (never advanced) is FENCE_CONFLICT, also on a never-advanced resource', async () => {
    expect(await deposit(1n, 10, 'task:y')).toEqual({ ok: false, code: 'FENCE_CONFLICT', fence: 0n });
    await advance(2n);
    expect(await deposit(5n, 10, 'task:y')).toEqual({ ok: false, code: 'FENCE_CONFLICT', fence: 2n });
    expect(await balance()).toBe(100n);
  });

  it('without a result id every call at the fence commits; nothing is stored', async () => {
    await advance(4n);
    expect(await deposit(4n, 1, undefined)).toMatchObject({ ok: true, outcome: 'written' });
    expect(await deposit(4n, 1, undefined)).toMatchObject({ ok: true, outcome: 'written' });
    expect(await balance()).toBe(102n);
    expect((await sinks[0]!.resourcePage(ACCOUNT, { after: 0n, limit: 1000, maxBytes: 1 << 22 })).results).toEqual([]);
  });

  it('refuses a capability that does not match (FORBIDDEN) before touching the database', async () => {
    await advance(4n);
    const call = fencedTransaction(
      pool,
      {
        resource: ACCOUNT,
        token: 4n,
        workerId: 'w',
        incarnation: 'i',
        capability: signCapability(KEY, { resource: ACCOUNT, token: 3n, workerId: 'w', incarnation: 'i' }),
        capabilityPublicKeys: PUBLIC_KEYS,
      },
      async () => ({}),
    );
    await expect(call).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect((await sinks[0]!.decisions(0, 10)).decisions).toHaveLength(1);
  });

  it('the caller holds only public keys: a capability it makes itself is FORBIDDEN', async () => {
    // Before Ed25519, the caller held the sink's HMAC keys and could sign a capability for any
    // token. Now the best it can do is sign with a key of its own under the coordinator's key id.
    await advance(4n);
    const own = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
    for (const k of PUBLIC_KEYS) expect(k.key.type).toBe('public');
    const call = fencedTransaction(
      pool,
      {
        resource: ACCOUNT,
        token: 4n,
        workerId: 'w',
        incarnation: 'i',
        capability: signCapability(own, { resource: ACCOUNT, token: 4n, workerId: 'w', incarnation: 'i' }),
        capabilityPublicKeys: PUBLIC_KEYS,
      },
      async (client) => {
        await client.query("UPDATE accounts SET balance = 0 WHERE id = 'alice'");
        return {};
      },
    );
    await expect(call).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await balance()).toBe(100n);
  });

  it('a callback that throws rolls everything back and its error goes up unchanged', async () => {
    await advance(4n);
    const boom = new Error('boom');
    const call = fencedTransaction(
      pool,
      {
        resource: ACCOUNT,
        token: 4n,
        workerId: 'w',
        incarnation: 'i',
        resultId: 'task:z',
        capability: signCapability(KEY, { resource: ACCOUNT, token: 4n, workerId: 'w', incarnation: 'i' }),
        capabilityPublicKeys: PUBLIC_KEYS,
      },
      async (client) => {
        await client.query("UPDATE accounts SET balance = 0 WHERE id = 'alice'");
        throw boom;
      },
    );
    await expect(call).rejects.toBe(boom);
    expect(await balance()).toBe(100n);
    expect(await sinks[0]!.resultOf(ACCOUNT, 'task:z')).toBeUndefined();
  });

  it('a caller paused inside its callback holds no fence row: the takeover goes through, the late commit is refused STALE_TOKEN', async () => {
    // A sink whose batch waits at most 1 s for a locked fence row: if the paused call held the row,
    // the takeover below would be refused UNAVAILABLE instead of going through.
    const bounded = await PostgresFenceStore.open({ url: server.url, lockTimeoutMs: 1_000 });
    let wake!: () => void;
    const paused = new Promise<void>((resolve) => (wake = resolve));
    try {
      await advance(5n);
      let inside!: () => void;
      const entered = new Promise<void>((resolve) => (inside = resolve));
      const call = fencedTransaction(
        pool,
        {
          resource: ACCOUNT,
          token: 5n,
          workerId: 'w',
          incarnation: 'i',
          resultId: 'task:paused',
          capability: signCapability(KEY, { resource: ACCOUNT, token: 5n, workerId: 'w', incarnation: 'i' }),
          capabilityPublicKeys: PUBLIC_KEYS,
        },
        async (client) => {
          await client.query("UPDATE accounts SET balance = balance + 1000 WHERE id = 'alice'");
          inside();
          await paused; // idle in transaction, no idle bound: as long as it likes
          await client.query("UPDATE accounts SET balance = balance + 1 WHERE id = 'alice'");
          return { deposited: 1001 };
        },
      );
      await entered;
      const [advanced] = await bounded.applyBatch([{ kind: 'advance', resource: ACCOUNT, token: 6n }]);
      expect(advanced).toMatchObject({ ok: true, outcome: 'advanced' });
      wake();
      expect(await call).toEqual({ ok: false, code: 'STALE_TOKEN', fence: 6n });
      expect(await balance()).toBe(100n);
      expect(await sinks[0]!.resultOf(ACCOUNT, 'task:paused')).toBeUndefined();
      const log = (await sinks[0]!.decisions(0, 100)).decisions.filter((d) => d.kind === 'write');
      expect(log.map((d) => [d.token, d.fenceBefore, d.outcome])).toEqual([[5n, 6n, 'STALE_TOKEN']]);
    } finally {
      wake(); // (when an expectation failed first: lets the paused call end, and the hooks run)
      await bounded.close();
    }
  });

  it("the commit message's check (leasehold.lock_fence) holds the fence row until COMMIT: an advance waits for it", async () => {
    // What orders a takeover against a commit: lock_fence locks the row it checks. Held here by
    // hand in an open transaction, a sink batch that waits at most 300 ms for a row gives up.
    const bounded = await PostgresFenceStore.open({ url: server.url, lockTimeoutMs: 300 });
    const session = new pg.Client({ connectionString: server.url });
    await session.connect();
    try {
      await advance(5n);
      await session.query('BEGIN');
      expect((await session.query('SELECT leasehold.lock_fence($1, 5) AS fence', [ACCOUNT])).rows).toEqual([
        { fence: '5' },
      ]);
      await expect(bounded.applyBatch([{ kind: 'advance', resource: ACCOUNT, token: 6n }])).rejects.toMatchObject({
        code: 'UNAVAILABLE',
      });
      await session.query('COMMIT');
      expect(await bounded.applyBatch([{ kind: 'advance', resource: ACCOUNT, token: 6n }])).toEqual([
        { ok: true, outcome: 'advanced', fence: 6n },
      ]);
      // And it refuses a token that is not the fence, with the fence in its DETAIL.
      await expect(session.query('SELECT leasehold.lock_fence($1, 5)', [ACCOUNT])).rejects.toMatchObject({
        code: 'LH409',
        detail: '6',
      });
    } finally {
      await session.end();
      await bounded.close();
    }
  });

  it('idleInTransactionTimeoutMs: PostgreSQL ends a session idle inside the callback; nothing of it commits', async () => {
    await advance(5n);
    let backend = 0;
    let wake!: () => void;
    const paused = new Promise<void>((resolve) => (wake = resolve));
    const call = fencedTransaction(
      pool,
      {
        resource: ACCOUNT,
        token: 5n,
        workerId: 'w',
        incarnation: 'i',
        resultId: 'task:idle',
        capability: signCapability(KEY, { resource: ACCOUNT, token: 5n, workerId: 'w', incarnation: 'i' }),
        capabilityPublicKeys: PUBLIC_KEYS,
        idleInTransactionTimeoutMs: 300,
      },
      async (client) => {
        await client.query("UPDATE accounts SET balance = balance + 1000 WHERE id = 'alice'");
        backend = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        await paused; // idle in transaction, holding alice's row
        await client.query("UPDATE accounts SET balance = balance + 1 WHERE id = 'alice'");
        return { deposited: 1001 };
      },
    );
    const settled = call.then(
      () => 'returned',
      () => 'failed',
    );
    // Observable: PostgreSQL ended the idle session (its backend is gone), and alice's row is free.
    await waitFor('the idle session to end', async () => {
      if (backend === 0) return false;
      const { rows } = await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend]);
      return rows.length === 0;
    });
    await pool.query("UPDATE accounts SET balance = balance + 0 WHERE id = 'alice'");
    wake();
    expect(await settled).toBe('failed');
    expect(await balance()).toBe(100n);
    expect(await sinks[0]!.resultOf(ACCOUNT, 'task:idle')).toBeUndefined();
  });

  it('under concurrent takeovers through two sink replicas, the balance is exactly the accepted deposits', async () => {
    const accepted: number[] = [];
    let refused = 0;
    await advance(1n);
    for (let token = 1n; token <= 25n; token++) {
      const amount = Number(token);
      const calls = [
        // the current holder, twice with one result id (a retry)
        deposit(token, amount, `task:${token}`, 'holder'),
        deposit(token, amount, `task:${token}`, 'holder'),
        // the previous holder, still writing
        deposit(token - 1n, 1000, `task:stale-${token}`, 'previous'),
        // the takeover, through either replica
        advance(token + 1n, Number(token % 2n)).then(() => undefined),
      ];
      for (const outcome of await Promise.all(calls)) {
        if (outcome === undefined) continue;
        if (outcome.ok && outcome.outcome === 'written')
          accepted.push((outcome.result as { deposited: number }).deposited);
        if (!outcome.ok) refused++;
      }
    }
    expect(await balance()).toBe(100n + BigInt(accepted.reduce((a, b) => a + b, 0)));
    // Per resource, seq order is commit order: no write is accepted under a token below a fence
    // already advanced before it, and no result id is credited twice.
    const log = (await sinks[0]!.decisions(0, 10_000)).decisions;
    let fence = 0n;
    const written = new Set<string>();
    for (const d of log) {
      if (d.kind === 'advance' && d.token > fence) fence = d.token;
      if (d.kind === 'write' && d.outcome === 'written') {
        expect(d.token, `write at seq ${d.seq}`).toBe(fence);
        expect(written.has(d.resultId ?? ''), `${d.resultId ?? ''} credited twice`).toBe(false);
        written.add(d.resultId ?? '');
      }
    }
    expect(refused).toBeGreaterThan(0);
  });
});
