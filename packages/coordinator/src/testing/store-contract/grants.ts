/** The LeaseStore contract: grants (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import { recordKvCalls } from '../kv-calls.js';
import { abandoned } from '../../core/lifecycle.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { ENV, type Tools } from './fixtures.js';

export function describeGrants(t: Tools): void {
  const { submit, open, job, current, grantOne, granted } = t;
  describe('grants', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    it('grants: the token is the owner key create_revision, the task counts the attempt, the request is recorded', async () => {
      const s = await open();
      const { token, requestId } = await granted(s, 't1', 'r1');
      expect(await store.owner('r1')).toMatchObject({ token, modRevision: token, leaseId: s.leaseId });
      expect((await store.task('t1'))?.record.attempts).toBe(1);
      expect((await store.holding(s.sessionId, requestId))?.token).toBe(token);
    });

    it('delivers the payload from the grant txn itself, and splits a batch by payload bytes', async () => {
      const s = await open();
      const big = { pad: 'x'.repeat(700_000) };
      const tasks = await Promise.all(['p1', 'p2', 'p3', 'p4'].map((id, i) => submit(id, `r-${id}`, { ...big, i })));
      const out = await store.grant(tasks.map((t, i) => job(s, t, `q${i}`)));
      const granted = out.map((r) => (r.ok && r.value.kind === 'granted' ? r.value : undefined));
      expect(
        granted.map((g) => (g === undefined ? undefined : (JSON.parse(g.payloadJson ?? 'null') as unknown))),
      ).toEqual([0, 1, 2, 3].map((i) => ({ ...big, i })));
      // 4 × 700 KB of payloads do not come back in one reply: more than one txn (revision).
      expect(new Set(granted.map((g) => g?.token)).size).toBeGreaterThan(1);
      const replay = await store.grantedTask('r-p2', 'p2');
      expect(JSON.parse(replay.payloadJson ?? 'null')).toEqual({ ...big, i: 1 });
    });

    it('refuses a second owner of a resource (raced), whoever asks', async () => {
      const s1 = await open('w1');
      const s2 = await open('w2');
      const first = await granted(s1, 't1', 'r1');
      const other = await submit('t2', 'r1');
      const out = await grantOne(job(s2, other, 'q-other'));
      expect(out.kind).toBe('raced');
      expect(await store.owner('r1')).toMatchObject({ token: first.token });
    });

    it('replays the grant of a request id that holds one', async () => {
      const s = await open();
      const { token, task, requestId } = await granted(s, 't1', 'r1');
      const out = await grantOne(job(s, { record: task.record, modRevision: token }, requestId));
      expect(out).toMatchObject({ kind: 'replay', holding: { token } });
    });

    it('refuses a grant compared on a task revision that is no longer current (raced)', async () => {
      const s = await open();
      const task = await submit('t1', 'r1');
      const stale = { record: task.record, modRevision: task.modRevision - 1n };
      expect((await grantOne(job(s, stale, 'q1'))).kind).toBe('raced');
      expect(await store.owner('r1')).toBeUndefined();
    });

    it('refuses a grant for a session served elsewhere or gone (sessionMoved)', async () => {
      const s = await open();
      const task = await submit('t1', 'r1');
      const stale = { ...job(s, task, 'q1'), sessionModRevision: s.modRevision - 1n };
      expect(await grantOne(stale)).toEqual({ kind: 'sessionMoved' });
      await store.revokeLease(s.leaseId);
      expect(await grantOne(job(s, task, 'q1'))).toEqual({ kind: 'sessionMoved' });
      expect(await store.owner('r1')).toBeUndefined();
    });

    it('grants a batch at one revision, and tells per job which failed when one cannot', async () => {
      const s = await open();
      const tasks = await Promise.all(['a', 'b', 'c'].map((id) => submit(id, `r-${id}`)));
      const [ta, tb, tc] = tasks;
      if (ta === undefined || tb === undefined || tc === undefined) throw new Error('tasks');
      const batch = await store.grant([job(s, ta, 'qa'), job(s, tb, 'qb')]);
      const tokens = batch.map((r) => (r.ok && r.value.kind === 'granted' ? r.value.token : undefined));
      expect(tokens[0]).toBeDefined();
      expect(tokens[0]).toBe(tokens[1]);
      const conflict = await submit('d', 'r-a'); // r-a is owned now
      const mixed = await store.grant([job(s, tc, 'qc'), job(s, conflict, 'qd')]);
      expect(mixed.map((r) => (r.ok ? r.value.kind : 'error'))).toEqual(['granted', 'raced']);
    });

    it('judges each job of a batch on its own: one txn grants the free ones and tells every other its outcome', async () => {
      const s = await open();
      const [ta, tb, tc, td, te] = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => submit(id, `r-${id}`)));
      if (ta === undefined || tb === undefined || tc === undefined || td === undefined || te === undefined) {
        throw new Error('tasks');
      }
      const held = await granted(s, 'x', 'r-b'); // r-b owned now: b loses (owner present)
      const staleD = { record: td.record, modRevision: td.modRevision - 1n }; // d changed since read
      const moved = { ...job(s, te, 'qe'), sessionModRevision: s.modRevision - 1n }; // e: session compare fails
      const replayed = job(s, tc, held.requestId); // c's request id already holds a grant
      const names = recordKvCalls(store.kv).txns;
      const out = await store.grant([job(s, ta, 'qa'), job(s, tb, 'qb'), replayed, job(s, staleD, 'qd'), moved]);
      expect(out.map((r) => (r.ok ? r.value.kind : 'error'))).toEqual([
        'granted',
        'raced',
        'replay',
        'raced',
        'sessionMoved',
      ]);
      // One txn for all five: no second round for the winners, none per job.
      expect(names).toEqual(['grantOwners']);
      const [a, b, c] = out.map((r) => (r.ok ? r.value : undefined));
      expect(a?.kind === 'granted' && (await store.owner('r-a'))?.token === a.token).toBe(true);
      expect(b).toEqual({ kind: 'raced', revision: a?.kind === 'granted' ? a.token : -1n });
      expect(c).toMatchObject({ kind: 'replay', holding: { token: held.token } });
      expect(await store.owner('r-b')).toMatchObject({ token: held.token });
      expect(await store.owner('r-c')).toBeUndefined();
      expect(await store.owner('r-d')).toBeUndefined();
      expect(await store.owner('r-e')).toBeUndefined();
      expect((await store.task('c'))?.record.attempts).toBe(0);
    });

    it('a batch none of whose jobs can be granted writes nothing', async () => {
      const s = await open();
      const [ta, tb] = await Promise.all(['a', 'b'].map((id) => submit(id, `r-${id}`)));
      if (ta === undefined || tb === undefined) throw new Error('tasks');
      const before = await granted(s, 'x', 'r-x');
      const stale = (t: typeof ta) => ({ record: t.record, modRevision: t.modRevision - 1n });
      const out = await store.grant([job(s, stale(ta), 'qa'), job(s, stale(tb), 'qb')]);
      expect(out).toEqual([
        { ok: true, value: { kind: 'raced', revision: before.token } },
        { ok: true, value: { kind: 'raced', revision: before.token } },
      ]);
      expect(await store.owner('r-a')).toBeUndefined();
      expect(await store.holding(s.sessionId, 'qa')).toBeUndefined();
    });

    it('abandons an unsent grant closing its attempt (closed): the attempt given back, the task backs off', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const written = await current('t1');
      const next = abandoned(written.record, a.token, 'sink down', ENV);
      const ref = { sessionId: s.sessionId, requestId: a.requestId, resource: 'r1', token: a.token, next };
      // A task record changed since the grant (task compare): only the keys go.
      await store.kv.txn('test', {
        compare: [],
        success: [op.put(store.keys.task('t1'), JSON.stringify(written.record))],
      });
      expect(await store.abandonGrant(ref)).toBe('removed');
      expect((await current('t1')).record.attempts).toBe(1);
      const b = await granted(s, 't2', 'r2');
      const nextB = abandoned((await current('t2')).record, b.token, 'sink down', ENV);
      const refB = { sessionId: s.sessionId, requestId: b.requestId, resource: 'r2', token: b.token, next: nextB };
      // Another owner token (owner compare): nothing is closed.
      expect(await store.abandonGrant({ ...refB, token: b.token + 1n })).toBe('gone');
      expect(await store.abandonGrant(refB)).toBe('closed');
      expect(await store.owner('r2')).toBeUndefined();
      expect((await current('t2')).record).toMatchObject({ attempts: 0, deferrals: 1, lastEvent: 'abandoned' });
    });

    it('abandons an unsent grant (removed), and its holding alone when the owner is gone (forgotten)', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const ref = { sessionId: s.sessionId, requestId: a.requestId, resource: 'r1', token: a.token };
      expect(await store.abandonGrant(ref)).toBe('removed');
      expect(await store.owner('r1')).toBeUndefined();
      expect(await store.holding(s.sessionId, a.requestId)).toBeUndefined();
      expect(await store.abandonGrant(ref)).toBe('gone');
      const b = await granted(s, 't2', 'r2');
      await store.kv.txn('test', { compare: [], success: [op.del(store.keys.owner('r2'))] });
      const refB = { sessionId: s.sessionId, requestId: b.requestId, resource: 'r2', token: b.token };
      expect(await store.abandonGrant(refB)).toBe('forgotten');
      expect(await store.holding(s.sessionId, b.requestId)).toBeUndefined();
    });
  });
}
