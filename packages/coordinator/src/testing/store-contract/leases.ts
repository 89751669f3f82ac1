/** The LeaseStore contract: held leases (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import { recordKvCalls } from '../kv-calls.js';
import { attemptFailed, completed, released } from '../../core/lifecycle.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import type { StoredTask } from '../../store/port.js';
import { ENV, PAYLOAD, type Tools } from './fixtures.js';

export function describeHeldLeases(t: Tools): void {
  const { open, job, current, proofOf, grantOne, granted, submit } = t;
  describe('held leases', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    it('releases with the holder proof only; the task is pending again, the attempt given back', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const task = await current('t1');
      const proof = proofOf(s, 'r1', a);
      const job = { ...proof, taskModRevision: task.modRevision, next: released(task.record, a.token, ENV.nowMs) };
      const wrong = [
        { ...job, token: a.token + 1n },
        { ...job, leaseId: '424242' },
        { ...job, requestId: 'q-other' },
        { ...job, taskModRevision: task.modRevision - 1n },
      ];
      for (const p of wrong) {
        const [r] = await store.finish([p]);
        expect(r?.ok && r.value.kind).toBe('notHolder');
      }
      const [ok] = await store.finish([job]);
      expect(ok?.ok && ok.value.kind).toBe('done');
      expect(await store.owner('r1')).toBeUndefined();
      expect((await current('t1')).record).toMatchObject({ state: 'pending', attempts: 0, lastEvent: 'released' });
      const [again] = await store.finish([job]);
      expect(again?.ok && again.value.kind).toBe('notHolder');
    });

    it('refuses to end an attempt whose owner key was rewritten (mod_revision moved)', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const task = await current('t1');
      const owner = await store.owner('r1');
      if (owner === undefined) throw new Error('no owner');
      await store.kv.txn('test', {
        compare: [],
        success: [op.put(store.keys.owner('r1'), JSON.stringify(owner.record), s.leaseId)],
      });
      const [r] = await store.finish([
        { ...proofOf(s, 'r1', a), taskModRevision: task.modRevision, next: released(task.record, a.token, 1) },
      ]);
      expect(r?.ok && r.value.kind).toBe('notHolder');
    });

    it('completes with the holder proof and an unchanged task; records the result', async () => {
      const s = await open();
      const a = await granted(s, 't1', 'r1');
      const task = await current('t1');
      const base = {
        ...proofOf(s, 'r1', a),
        taskModRevision: task.modRevision,
        next: completed(task.record, a.token, 'task:t1', ENV.nowMs),
      };
      const [stale] = await store.finish([{ ...base, taskModRevision: task.modRevision - 1n }]);
      expect(stale?.ok && stale.value.kind).toBe('notHolder');
      const [other] = await store.finish([{ ...base, token: a.token - 1n }]);
      expect(other?.ok && other.value.kind).toBe('notHolder');
      const [done] = await store.finish([base]);
      expect(done?.ok && done.value.kind).toBe('done');
      expect((await current('t1')).record).toMatchObject({
        state: 'completed',
        result: { resultId: 'task:t1', token: a.token.toString() },
        last: { attempt: 1, outcome: 'completed', token: a.token.toString() },
        endedAttempts: 1,
      });
      expect((await store.taskDetail('t1'))?.history).toMatchObject([
        { attempt: 1, outcome: 'completed', token: a.token.toString() },
      ]);
      expect(await store.owner('r1')).toBeUndefined();
    });

    it('fails an attempt: pending after the backoff while attempts are left, then failed', async () => {
      const s = await open();
      const error = { name: 'Boom', message: 'handler threw', retryable: true };
      const a = await granted(s, 't1', 'r1');
      const t1 = await current('t1');
      const [first] = await store.finish([
        {
          ...proofOf(s, 'r1', a),
          taskModRevision: t1.modRevision,
          next: attemptFailed(t1.record, a.token, error, 'failed', ENV),
        },
      ]);
      expect(first?.ok && first.value.kind).toBe('done');
      const retrying = await current('t1');
      expect(retrying.record).toMatchObject({ state: 'pending', attempts: 1, lastEvent: 'retrying' });
      expect(retrying.record.notBeforeMs).toBeGreaterThan(ENV.nowMs);
      const b = await grantOne(job(s, retrying, 'q-again'));
      if (b.kind !== 'granted') throw new Error(b.kind);
      const t2 = await current('t1');
      const [second] = await store.finish([
        {
          ...proofOf(s, 'r1', { token: b.token, requestId: 'q-again' }),
          taskModRevision: t2.modRevision,
          next: attemptFailed(t2.record, b.token, error, 'failed', ENV),
        },
      ]);
      expect(second?.ok && second.value.kind).toBe('done');
      expect((await current('t1')).record).toMatchObject({
        state: 'failed',
        attempts: 2,
        lastError: { name: 'Boom' },
      });
    });

    it('ends a batch in one txn, and tells which failed when one cannot', async () => {
      const s = await open();
      const a = await granted(s, 'ta', 'ra');
      const b = await granted(s, 'tb', 'rb');
      const jobFor = async (taskId: string, resource: string, g: { token: bigint; requestId: string }) => {
        const t = await current(taskId);
        return {
          ...proofOf(s, resource, g),
          taskModRevision: t.modRevision,
          next: completed(t.record, g.token, `task:${taskId}`, ENV.nowMs),
        };
      };
      const ja = await jobFor('ta', 'ra', a);
      const jb = { ...(await jobFor('tb', 'rb', b)), token: b.token + 7n };
      const names = recordKvCalls(store.kv).txns;
      const out = await store.finish([ja, jb]);
      expect(out.map((r) => (r.ok ? r.value.kind : 'error'))).toEqual(['done', 'notHolder']);
      // One txn: the job whose holder proof fails fails no other, and nothing is sent again.
      expect(names).toEqual(['finishAttempts']);
      expect((await current('ta')).record.state).toBe('completed');
      expect(await store.owner('ra')).toBeUndefined();
      expect(await store.owner('rb')).toMatchObject({ token: b.token });
      expect((await current('tb')).modRevision).toBe(jb.taskModRevision);
    });
  });

  describe("a completion's carried grant, in the completion's own txn", () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    const completion = async (s: Awaited<ReturnType<typeof open>>, taskId: string, resource: string) => {
      const a = await granted(s, taskId, resource);
      const task = await current(taskId);
      return {
        ...proofOf(s, resource, a),
        taskModRevision: task.modRevision,
        next: completed(task.record, a.token, `task:${taskId}`, ENV.nowMs),
      };
    };

    it("is made only if the finish is, at the finish txn's revision (the session never holds both)", async () => {
      const s = await open();
      const finish = await completion(s, 't1', 'r1');
      const t2 = await submit('t2', 'r2');
      const carried = job(s, t2, 'q-next');
      // The finish's holder proof fails: the grant nested under it is not even judged.
      const [refused] = await store.finish([{ ...finish, token: finish.token + 1n, carried }]);
      expect(refused?.ok && refused.value).toEqual({ kind: 'notHolder' });
      expect(await store.owner('r2')).toBeUndefined();
      expect(await store.holding(s.sessionId, 'q-next')).toBeUndefined();
      expect((await current('t2')).modRevision).toBe(t2.modRevision);
      expect(await store.owner('r1')).toMatchObject({ token: finish.token });

      const [done] = await store.finish([{ ...finish, carried }]);
      if (done === undefined || !done.ok || done.value.kind !== 'done') throw new Error(JSON.stringify(done));
      const revision = done.value.revision;
      expect(done.value.carried).toEqual({ kind: 'granted', token: revision, payloadJson: JSON.stringify(PAYLOAD) });
      expect(await store.owner('r1')).toBeUndefined();
      expect((await current('t1')).record.state).toBe('completed');
      expect(await store.owner('r2')).toMatchObject({ token: revision, record: { taskId: 't2', requestId: 'q-next' } });
      expect((await store.holding(s.sessionId, 'q-next'))?.token).toBe(revision);
      expect((await current('t2')).modRevision).toBe(revision);
    });

    it("splits completions by their carried grants' payload bytes: every payload delivered, not all in one reply", async () => {
      const s = await open();
      const big = { pad: 'x'.repeat(700_000) };
      const ids = ['p1', 'p2', 'p3', 'p4'];
      const finishes = await Promise.all(ids.map((id) => completion(s, `done-${id}`, `rd-${id}`)));
      const next = await Promise.all(ids.map((id, i) => submit(id, `r-${id}`, { ...big, i })));
      const out = await store.finish(
        finishes.map((f, i) => ({ ...f, carried: job(s, next[i] as StoredTask, `q-${i}`) })),
      );
      const carried = out.map((r) => (r.ok && r.value.kind === 'done' ? r.value.carried : undefined));
      expect(
        carried.map((c) => (c?.kind === 'granted' ? (JSON.parse(c.payloadJson ?? 'null') as unknown) : c)),
      ).toEqual([0, 1, 2, 3].map((i) => ({ ...big, i })));
      // 4 × 700 KB of payloads do not come back in one reply: more than one txn (revision).
      expect(new Set(carried.map((c) => (c?.kind === 'granted' ? c.token : undefined))).size).toBeGreaterThan(1);
    });

    it('tells a carried grant that lost its race or was granted before; its finish stands', async () => {
      const s = await open();
      const f1 = await completion(s, 't1', 'r1');
      const t2 = await submit('t2', 'r2');
      const [raced] = await store.finish([
        { ...f1, carried: { ...job(s, t2, 'q-a'), taskModRevision: t2.modRevision - 1n } },
      ]);
      expect(raced?.ok && raced.value).toMatchObject({ kind: 'done', carried: { kind: 'raced' } });
      expect((await current('t1')).record.state).toBe('completed');
      expect(await store.owner('r2')).toBeUndefined();

      const f3 = await completion(s, 't3', 'r3');
      const before = await grantOne(job(s, await current('t2'), 'q-b'));
      if (before.kind !== 'granted') throw new Error(before.kind);
      const t4 = await submit('t4', 'r4');
      const [replay] = await store.finish([{ ...f3, carried: job(s, t4, 'q-b') }]);
      expect(replay?.ok && replay.value).toMatchObject({
        kind: 'done',
        carried: { kind: 'replay', holding: { token: before.token } },
      });
      expect(await store.owner('r4')).toBeUndefined();
    });

    it('a batch of completions each carrying a grant is one txn; a grant that clashes with its own finish is left out', async () => {
      const s = await open();
      const fa = await completion(s, 'ta', 'ra');
      const fb = await completion(s, 'tb', 'rb');
      const tc = await submit('tc', 'rc');
      const td = await submit('td', 'rd');
      const names = recordKvCalls(store.kv).txns;
      const out = await store.finish([
        { ...fa, carried: job(s, tc, 'q-c') },
        { ...fb, carried: job(s, td, 'q-d') },
      ]);
      expect(names).toEqual(['finishAttempts']);
      const [a, b] = out.map((r) => (r.ok ? r.value : undefined));
      expect(a).toMatchObject({ kind: 'done', carried: { kind: 'granted' } });
      expect(b).toMatchObject({ kind: 'done', carried: { kind: 'granted' } });
      expect(await store.owner('rc')).toMatchObject({ token: a?.kind === 'done' ? a.revision : -1n });
      expect(await store.owner('rd')).toBeDefined();

      // A grant of the resource the finish frees would put and delete one key in one txn (etcd
      // refuses that): the finish goes without it, and says so by carrying no outcome.
      const fe = await completion(s, 'te', 're');
      const tf = await submit('tf', 're');
      const [alone] = await store.finish([{ ...fe, carried: job(s, tf, 'q-f') }]);
      expect(alone?.ok && alone.value).toEqual({ kind: 'done', revision: expect.any(BigInt) as unknown });
      expect(await store.owner('re')).toBeUndefined();
      expect((await current('tf')).modRevision).toBe(tf.modRevision);
    });
  });
}
