/** The LeaseStore contract: locks, watch, web console (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import type { StoreEvent } from '../../store/port.js';
import { type StoreTarget, type Tools } from './fixtures.js';

export function describeLocks(t: Tools): void {
  describe('locks', () => {
    let store: KvLeaseStore;
    let target: StoreTarget;
    beforeEach(() => {
      store = t.store();
      target = t.target();
    });
    it('one holder at a time; released by its lease, and gone by itself when the lease ends', async () => {
      const lock = await store.acquireLock('retention', 'c1', 2);
      expect(lock).toBeDefined();
      expect(await store.acquireLock('retention', 'c2', 2)).toBeUndefined();
      if (lock === undefined) return;
      await store.releaseLock('retention', lock);
      const again = await store.acquireLock('retention', 'c2', 1);
      expect(again).toBeDefined();
      let free: unknown;
      for (let i = 0; i < 100 && free === undefined; i += 1) {
        await target.pass(50);
        free = await store.acquireLock('retention', 'c3', 5);
      }
      expect(free).toBeDefined();
    });
  });
}

export function describeWatch(t: Tools): void {
  const { open, granted } = t;
  describe('watch', () => {
    let store: KvLeaseStore;
    let target: StoreTarget;
    beforeEach(() => {
      store = t.store();
      target = t.target();
    });
    it('delivers parsed task, owner and session events grouped by revision, then progress', async () => {
      const start = await store.snapshot(() => undefined);
      const groups: { revision: bigint; events: readonly StoreEvent[] }[] = [];
      let progress = 0n;
      const handle = await store.watch(start.revision + 1n, {
        onRevision: (revision, events) => groups.push({ revision, events }),
        onProgress: (revision) => {
          progress = revision;
        },
        onError: () => undefined,
      });
      try {
        const s = await open();
        const { token } = await granted(s, 't1', 'r1');
        for (let i = 0; i < 50 && progress < token; i += 1) await target.pass(20);
        const grant = groups.find((g) => g.revision === token);
        expect(grant?.events.map((e) => e.kind).sort()).toEqual(['owner', 'task']);
        const owner = grant?.events.find((e) => e.kind === 'owner');
        expect(owner).toMatchObject({ resource: 'r1', owner: { token, record: { taskId: 't1' } } });
        expect(groups.some((g) => g.events.some((e) => e.kind === 'session' && e.sessionId === s.sessionId))).toBe(
          true,
        );
        await store.revokeLease(s.leaseId);
        const revoked = await store.snapshot(() => undefined);
        for (let i = 0; i < 50 && progress < revoked.revision; i += 1) await target.pass(20);
        const last = groups.at(-1);
        expect(last?.events).toEqual(
          expect.arrayContaining([
            { kind: 'owner', resource: 'r1', owner: undefined },
            { kind: 'session', sessionId: s.sessionId, session: undefined },
          ]),
        );
      } finally {
        await handle.cancel();
      }
    });
  });
}

export function describeWebConsole(t: Tools): void {
  describe('web console', () => {
    let store: KvLeaseStore;
    let target: StoreTarget;
    beforeEach(() => {
      store = t.store();
      target = t.target();
    });
    it('revokeConsoleSession: recorded once (a second logout writes nothing), read back, watched', async () => {
      const before = await store.consoleRevocations();
      expect(before.revocations).toEqual([]);
      const seen: string[] = [];
      const handle = await store.watchConsoleRevocations(before.revision + 1n, {
        onRevoked: (revocations) => seen.push(...revocations.map((r) => r.loginId)),
        onError: () => undefined,
      });
      try {
        const revocation = { loginId: 'AAAAAAAAAAAAAAAA', expiresAtMs: 2_000_000_000_000 };
        const first = await store.revokeConsoleSession(revocation, 60);
        expect(first.kind).toBe('revoked');
        // The key is absent-compared: a second logout of the same login changes nothing.
        expect(await store.revokeConsoleSession(revocation, 60)).toEqual({ kind: 'already' });
        expect((await store.consoleRevocations()).revocations).toEqual([revocation]);
        for (let i = 0; i < 50 && seen.length === 0; i += 1) await target.pass(20);
        expect(seen).toEqual([revocation.loginId]);
        // Not in the index's watch range: the task feed never sees the console's keys.
        expect(store.keys.parse(store.keys.consoleRevocation(revocation.loginId))).toBeUndefined();
      } finally {
        await handle.cancel();
      }
    });

    it("revokeConsoleSession: the key lives on a lease of the cookie's remaining life", async () => {
      const revocation = { loginId: 'BBBBBBBBBBBBBBBB', expiresAtMs: 2_000_000_000_000 };
      await store.revokeConsoleSession(revocation, 1);
      expect((await store.consoleRevocations()).revocations).toEqual([revocation]);
      for (let i = 0; i < 200 && (await store.consoleRevocations()).revocations.length > 0; i += 1) {
        await target.pass(50);
      }
      expect((await store.consoleRevocations()).revocations).toEqual([]);
    });
  });
}
