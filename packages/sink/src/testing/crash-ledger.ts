/**
 * The ledger of the crash tests: drivers that advance and write under load and record what was
 * acknowledged and what was cut off, and `verify`, which checks the sink's state against it:
 *   1. every acknowledged write is present with its exact payload and its `written` decision;
 *   2. no fence ever went back: each fence >= every acknowledged advance and >= the fence seen at
 *      the previous check, and each resource's decision log shows a non-decreasing fence;
 *   3. nothing unacknowledged is half-visible: a write whose request died is either present with
 *      its exact payload AND its decision, or absent with no decision; nothing we never sent exists;
 *   4. decision sequence numbers strictly increase across restarts.
 * Used by crash.int.test.ts (SQLite) and postgres-crash.int.test.ts (two replicas on PostgreSQL).
 */
import { canonicalJson, type Decision } from '@leasehold/protocol';
import { expect } from 'vitest';
import type { SinkClient } from '@leasehold/sink-client';
import { INCARNATION, sign } from './fixtures.js';

const WRITES_PER_TOKEN = 4;

export interface Ledger {
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

export const keyOf = (resource: string, resultId: string) => `${resource}\u0000${resultId}`;

function bump(map: Map<string, bigint>, resource: string, value: bigint): void {
  if (value > (map.get(resource) ?? 0n)) map.set(resource, value);
}

export function newLedger(): Ledger {
  return { ackedFence: new Map(), lastFence: new Map(), acked: new Map(), unknown: new Map(), lastSeq: 0 };
}

/**
 * Load for at least `minMs` (a random kill point) and until at least `minNewAcks` more writes were
 * acknowledged than `ackedBefore`: a kill then always lands on a sink that was doing work, however
 * slow the machine (a fixed window alone made the "enough work happened" checks depend on speed).
 */
export async function loadUntil(
  ledger: Ledger,
  ackedBefore: number,
  minMs: number,
  minNewAcks: number,
  timeoutMs = 30_000,
): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, minMs));
  const deadline = Date.now() + timeoutMs;
  while (ledger.acked.size - ackedBefore < minNewAcks) {
    if (Date.now() > deadline) {
      throw new Error(
        `only ${ledger.acked.size - ackedBefore} of ${minNewAcks} writes acknowledged in ${timeoutMs} ms`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/**
 * One driver per resource: advance to the next token, then write a few results concurrently; each
 * request goes to one of `clients` (replicas of one store) at random. Returns at the first failure.
 */
export async function drive(
  clients: readonly SinkClient[],
  resource: string,
  round: number,
  ledger: Ledger,
  stopAtMs = Infinity,
): Promise<void> {
  const pick = (): SinkClient => {
    const client = clients[Math.floor(Math.random() * clients.length)];
    if (client === undefined) throw new Error('no client');
    return client;
  };
  for (let step = 0; Date.now() < stopAtMs; step++) {
    const token = (ledger.ackedFence.get(resource) ?? 0n) + 1n + BigInt(step % 2);
    let advanced;
    try {
      advanced = await pick().advance(resource, token);
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
          const result = await pick().write({
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

export async function allDecisions(client: SinkClient): Promise<Decision[]> {
  const all: Decision[] = [];
  let after = 0;
  for (;;) {
    const page = await client.decisions(after, 1000);
    if (page.decisions.length === 0) return all;
    all.push(...page.decisions);
    after = page.next;
  }
}

export async function verify(client: SinkClient, ledger: Ledger, resources: readonly string[]): Promise<void> {
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
  for (const resource of resources) {
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
