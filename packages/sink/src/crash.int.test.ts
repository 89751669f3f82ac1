/**
 * Crash test: the built sink as a real process, SIGKILLed at random moments under concurrent
 * advances and writes, restarted each time on the same database. After every restart:
 *   1. every acknowledged write is present with its exact payload and its `written` decision;
 *   2. no fence ever went back: each fence >= every acknowledged advance and >= the fence seen at
 *      the previous restart, and each resource's decision log shows a non-decreasing fence;
 *   3. nothing unacknowledged is half-visible: a write whose request died is either present with
 *      its exact payload AND its decision, or absent with no decision; nothing we never sent exists;
 *   4. decision sequence numbers strictly increase across restarts.
 */
import { canonicalJson, type Decision } from '@leasehold/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SinkClient } from '@leasehold/sink-client';
import { COORDINATOR_KEY, INCARNATION, sign, tempDir, type TempDir } from './testing/fixtures.js';
import { spawnSink } from './testing/spawn-sink.js';

const KILLS = 22;
const RESOURCES = ['crash/a', 'crash/b', 'crash/c', 'crash/d', 'crash/e', 'crash/f'];
const WRITES_PER_TOKEN = 4;

interface Ledger {
  /** Highest token whose advance was acknowledged, per resource. */
  readonly ackedFence: Map<string, bigint>;
  /** Fence observed at the previous restart, per resource. */
  readonly lastFence: Map<string, bigint>;
  /** Acknowledged writes: key -> canonical payload. */
  readonly acked: Map<string, string>;
  /** Writes whose request failed without an answer: key -> canonical payload. */
  readonly unknown: Map<string, string>;
  lastSeq: number;
}

const keyOf = (resource: string, resultId: string) => `${resource}\u0000${resultId}`;

function bump(map: Map<string, bigint>, resource: string, value: bigint): void {
  if (value > (map.get(resource) ?? 0n)) map.set(resource, value);
}

/** One driver per resource: advance to the next token, then write a few results concurrently. */
async function drive(client: SinkClient, resource: string, round: number, ledger: Ledger): Promise<void> {
  for (let step = 0; ; step++) {
    const token = (ledger.ackedFence.get(resource) ?? 0n) + 1n + BigInt(step % 2);
    let advanced;
    try {
      advanced = await client.advance(resource, token);
    } catch {
      return; // the sink died; whether this advance landed is checked through the fences
    }
    if (!advanced.ok) {
      bump(ledger.ackedFence, resource, advanced.fence);
      continue;
    }
    bump(ledger.ackedFence, resource, advanced.fence);
    const writes = Array.from({ length: WRITES_PER_TOKEN }, (_, n) => {
      const resultId = `k${round}-s${step}-n${n}`;
      const payload = { round, step, n, token: token.toString(), nonce: Math.random() };
      return { resultId, payload, key: keyOf(resource, resultId) };
    });
    const cut = { died: false };
    await Promise.all(
      writes.map(async (w) => {
        try {
          const result = await client.write({
            resource,
            token: advanced.fence,
            resultId: w.resultId,
            workerId: 'crash-worker',
            incarnation: INCARNATION,
            capability: sign(resource, advanced.fence, 'crash-worker'),
            payload: w.payload,
          });
          if (result.ok) ledger.acked.set(w.key, canonicalJson(w.payload));
        } catch {
          ledger.unknown.set(w.key, canonicalJson(w.payload));
          cut.died = true;
        }
      }),
    );
    if (cut.died) return;
  }
}

async function allDecisions(client: SinkClient): Promise<Decision[]> {
  const all: Decision[] = [];
  let after = 0;
  for (;;) {
    const page = await client.decisions(after, 1000);
    if (page.decisions.length === 0) return all;
    all.push(...page.decisions);
    after = page.next;
  }
}

async function verify(client: SinkClient, ledger: Ledger): Promise<void> {
  const decisions = await allDecisions(client);
  const seqs = decisions.map((d) => d.seq);
  for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeGreaterThan(seqs[i - 1] ?? 0);
  expect(seqs.at(-1) ?? 0).toBeGreaterThanOrEqual(ledger.lastSeq);
  ledger.lastSeq = seqs.at(-1) ?? 0;

  const written = new Map<string, number>();
  const fenceTrail = new Map<string, bigint>();
  for (const d of decisions) {
    const before = BigInt(d.fenceBefore);
    expect(before, `fence of ${d.resource} went back at seq ${d.seq}`).toBeGreaterThanOrEqual(
      fenceTrail.get(d.resource) ?? 0n,
    );
    fenceTrail.set(d.resource, d.outcome === 'advanced' ? BigInt(d.token) : before);
    if (d.outcome === 'written' && d.resultId !== undefined) {
      const key = keyOf(d.resource, d.resultId);
      written.set(key, (written.get(key) ?? 0) + 1);
    }
  }

  const storedKeys = new Set<string>();
  for (const resource of RESOURCES) {
    const view = await client.getResource(resource);
    expect(view.fence, `fence of ${resource} below an acknowledged advance`).toBeGreaterThanOrEqual(
      ledger.ackedFence.get(resource) ?? 0n,
    );
    expect(view.fence, `fence of ${resource} went back across a restart`).toBeGreaterThanOrEqual(
      ledger.lastFence.get(resource) ?? 0n,
    );
    expect(view.fence).toBe(fenceTrail.get(resource) ?? 0n);
    ledger.lastFence.set(resource, view.fence);
    // The sink may have committed advances we never heard about; drivers continue above them.
    bump(ledger.ackedFence, resource, view.fence);

    const stored = new Map(view.results.map((r) => [keyOf(resource, r.resultId), canonicalJson(r.payload)]));
    for (const [key, payload] of stored) {
      storedKeys.add(key);
      const sent = ledger.acked.get(key) ?? ledger.unknown.get(key);
      expect(sent, `a result nobody sent: ${key}`).toBeDefined();
      expect(payload).toBe(sent);
      expect(written.get(key), `result without exactly one written decision: ${key}`).toBe(1);
    }
    for (const [key, payload] of ledger.acked) {
      if (!key.startsWith(`${resource}\u0000`)) continue;
      expect(stored.get(key), `acknowledged write lost: ${key}`).toBe(payload);
    }
    for (const key of ledger.unknown.keys()) {
      if (!key.startsWith(`${resource}\u0000`)) continue;
      // Either fully there (row + decision, checked above) or fully absent.
      if (!stored.has(key)) expect(written.has(key), `decision without its result: ${key}`).toBe(false);
    }
  }
  for (const key of written.keys())
    expect(storedKeys.has(key), `written decision without its result: ${key}`).toBe(true);
}

describe('crash safety of the built sink (SIGKILL at random moments)', () => {
  let dir: TempDir;
  beforeAll(() => {
    dir = tempDir('leasehold-sink-crash-');
  });
  afterAll(() => {
    dir.remove();
  });

  it(`keeps every acknowledged write and every fence across ${KILLS} kills`, { timeout: 120_000 }, async () => {
    const dbPath = dir.file('sink.db');
    const ledger: Ledger = {
      ackedFence: new Map(),
      lastFence: new Map(),
      acked: new Map(),
      unknown: new Map(),
      lastSeq: 0,
    };
    let killedWithWork = 0;
    for (let round = 0; round <= KILLS; round++) {
      const sink = await spawnSink({ dir: dir.path, dbPath, env: { LEASEHOLD_SINK_DECISION_RETENTION: '0' } });
      const client = new SinkClient({ url: sink.url, key: COORDINATOR_KEY, timeoutMs: 3000, maxSockets: 32 });
      try {
        await verify(client, ledger);
        if (round === KILLS) break;
        const ackedBefore = ledger.acked.size;
        const drivers = RESOURCES.map((r) => drive(client, r, round, ledger));
        await new Promise((resolve) => setTimeout(resolve, 60 + Math.random() * 340));
        sink.kill('SIGKILL');
        const exit = await sink.exited;
        expect(exit.signal).toBe('SIGKILL');
        await Promise.all(drivers);
        if (ledger.acked.size > ackedBefore) killedWithWork++;
      } finally {
        void client.close();
        sink.kill('SIGKILL');
        await sink.exited;
      }
    }
    // The kills landed under load: many writes acknowledged, and some requests cut off mid-flight.
    expect(killedWithWork).toBeGreaterThanOrEqual(KILLS - 2);
    expect(ledger.acked.size).toBeGreaterThan(KILLS * 20);
    expect(ledger.unknown.size).toBeGreaterThan(0);
  });
});
