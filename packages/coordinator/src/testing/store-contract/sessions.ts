/** The LeaseStore contract: sessions (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import type { EndOutcome } from '../../store/port.js';
import { sessionRecord, type Tools } from './fixtures.js';

export function describeSessions(t: Tools): void {
  const { submit, open, job, grantOne, granted } = t;
  describe('sessions', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    it('opens a session on a fresh lease; its key proves who serves it', async () => {
      const s = await open();
      const stored = await store.session(s.sessionId);
      expect(stored).toMatchObject({ sessionId: s.sessionId, leaseId: s.leaseId, modRevision: s.modRevision });
      expect(stored?.record.workerId).toBe('w1');
    });

    it('adopts only at the mod_revision read (a second adoption from the same read is raced)', async () => {
      const s = await open();
      const read = await store.session(s.sessionId);
      if (read === undefined) throw new Error('no session');
      const first = await store.adoptSession(read, { ...read.record, coordinatorId: 'c2' });
      expect(first.kind).toBe('adopted');
      const second = await store.adoptSession(read, { ...read.record, coordinatorId: 'c3' });
      expect(second).toEqual({ kind: 'raced' });
      expect((await store.session(s.sessionId))?.record.coordinatorId).toBe('c2');
    });

    it('ends a session: its owners, holdings and key at one revision; then gone', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const b = await granted(s, 't2', 'r2');
      const held = [
        { resource: 'r1', token: a.token },
        { resource: 'r2', token: b.token },
      ];
      const ended = await store.endSession({ sessionId: s.sessionId, knownModRevision: s.modRevision, held });
      expect(ended.kind).toBe('ended');
      expect(await store.owner('r1')).toBeUndefined();
      expect(await store.owner('r2')).toBeUndefined();
      expect(await store.session(s.sessionId)).toBeUndefined();
      expect(await store.holding(s.sessionId, a.requestId)).toBeUndefined();
      const again = await store.endSession({ sessionId: s.sessionId, knownModRevision: s.modRevision, held });
      expect(again).toEqual({ kind: 'gone' });
    });

    it('does not end a session a peer adopted (moved), nor one whose holdings were under-reported (changed)', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      // Holdings from an index that missed the grant: the holdings compare fails it.
      const lagging = await store.endSession({
        sessionId: s.sessionId,
        knownModRevision: s.modRevision,
        held: [],
        knownUpTo: a.token - 1n,
      });
      expect(lagging).toEqual({ kind: 'changed' });
      // A wrong token for a held owner: the owner compare fails it.
      const wrongToken = await store.endSession({
        sessionId: s.sessionId,
        knownModRevision: s.modRevision,
        held: [{ resource: 'r1', token: a.token + 1000n }],
      });
      expect(wrongToken).toEqual({ kind: 'changed' });
      expect(await store.owner('r1')).toMatchObject({ token: a.token });
      const read = await store.session(s.sessionId);
      if (read === undefined) throw new Error('no session');
      await store.adoptSession(read, { ...read.record, coordinatorId: 'peer' });
      const moved = await store.endSession({
        sessionId: s.sessionId,
        knownModRevision: s.modRevision,
        held: [{ resource: 'r1', token: a.token }],
      });
      expect(moved).toEqual({ kind: 'moved' });
      expect(await store.owner('r1')).toMatchObject({ token: a.token });
    });

    it('ends a batch of sessions in one txn, each judged on its own (ended, changed, moved, gone)', async () => {
      const [s1, s2, s3, s4, s5] = [await open(), await open(), await open(), await open(), await open()];
      const a = await granted(s1, 't1', 'r1');
      const b = await granted(s2, 't2', 'r2');
      const c = await granted(s3, 't3', 'r3');
      const d = await granted(s4, 't4', 'r4');
      const read = await store.session(s4.sessionId);
      if (read === undefined) throw new Error('no session');
      await store.adoptSession(read, { ...read.record, coordinatorId: 'peer' });
      expect(
        (await store.endSession({ sessionId: s5.sessionId, knownModRevision: s5.modRevision, held: [] })).kind,
      ).toBe('ended');
      const end = (s: typeof s1, held: { resource: string; token: bigint }[]) => ({
        sessionId: s.sessionId,
        knownModRevision: s.modRevision,
        held,
      });
      const outcomes = await store.endSessions([
        end(s1, [{ resource: 'r1', token: a.token }]),
        end(s3, [{ resource: 'r3', token: c.token + 1000n }]), // a wrong token: changed
        end(s4, [{ resource: 'r4', token: d.token }]), // adopted by a peer: moved
        end(s5, []), // ended already: gone
        end(s2, [{ resource: 'r2', token: b.token }]),
      ]);
      const values = outcomes.map((o) => (o.ok ? o.value : o.error)) as EndOutcome[];
      expect(values.map((v) => v.kind)).toEqual(['ended', 'changed', 'moved', 'gone', 'ended']);
      // One txn: both ends at one revision, the failed ones cost them nothing.
      const [first, , , , last] = values;
      expect(first?.kind === 'ended' && last?.kind === 'ended' && first.revision === last.revision).toBe(true);
      expect(await store.owner('r1')).toBeUndefined();
      expect(await store.owner('r2')).toBeUndefined();
      expect(await store.session(s1.sessionId)).toBeUndefined();
      expect(await store.holding(s2.sessionId, b.requestId)).toBeUndefined();
      expect(await store.owner('r3')).toMatchObject({ token: c.token });
      expect(await store.owner('r4')).toMatchObject({ token: d.token });
      expect(await store.session(s3.sessionId)).toBeDefined();
    });

    it('closes a session (ending): grants compared on the old mod_revision fail from then on', async () => {
      const s = await open();
      // The same close each time, on the mod_revision the session was opened with.
      const close = () =>
        store.closeSession({
          sessionId: s.sessionId,
          leaseId: s.leaseId,
          knownModRevision: s.modRevision,
          record: sessionRecord('w1'),
        });
      const closed = await close();
      expect(closed.kind).toBe('closed');
      expect((await store.session(s.sessionId))?.record.ending).toBe(true);
      const task = await submit('t1', 'r1');
      expect(await grantOne(job(s, task, 'q1'))).toEqual({ kind: 'sessionMoved' });
      const twice = await close();
      expect(twice).toEqual({ kind: 'moved' });
      await store.revokeLease(s.leaseId);
      expect(await store.session(s.sessionId)).toBeUndefined();
      const gone = await close();
      expect(gone).toEqual({ kind: 'gone' });
    });
  });
}
