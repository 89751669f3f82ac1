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
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SinkClient } from '@leasehold/sink-client';
import { drive, loadUntil, newLedger, verify } from './testing/crash-ledger.js';
import { COORDINATOR_KEY, tempDir, type TempDir } from './testing/fixtures.js';
import { spawnSink } from './testing/spawn-sink.js';

const KILLS = 22;
const RESOURCES = ['crash/a', 'crash/b', 'crash/c', 'crash/d', 'crash/e', 'crash/f'];

describe('crash safety of the built sink (SIGKILL at random moments)', () => {
  let dir: TempDir;
  beforeAll(() => {
    dir = tempDir('leasehold-sink-crash-');
  });
  afterAll(() => {
    dir.remove();
  });

  it(`keeps every acknowledged write and every fence across ${KILLS} kills`, { timeout: 180_000 }, async () => {
    const dbPath = dir.file('sink.db');
    const ledger = newLedger();
    let killedWithWork = 0;
    for (let round = 0; round <= KILLS; round++) {
      const sink = await spawnSink({ dir: dir.path, dbPath, env: { LEASEHOLD_SINK_DECISION_RETENTION: '0' } });
      const client = new SinkClient({ url: sink.url, key: COORDINATOR_KEY, timeoutMs: 3000, maxSockets: 32 });
      try {
        await verify(client, ledger, RESOURCES);
        if (round === KILLS) break;
        const ackedBefore = ledger.acked.size;
        const drivers = RESOURCES.map((r) => drive([client], r, round, ledger));
        await loadUntil(ledger, ackedBefore, 60 + Math.random() * 340, 25);
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
