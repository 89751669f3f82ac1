/** The LeaseStore contract: held leases (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import { attemptFailed, completed, released } from '../../core/lifecycle.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { ENV, type Tools } from './fixtures.js';

export function describeHeldLeases(t: Tools): void {
  const { open, job, current, proofOf, grantOne, granted } = t;
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
      const names: string[] = [];
      const txn = store.kv.txn.bind(store.kv);
      store.kv.txn = (name, spec) => {
        names.push(name);
        return txn(name, spec);
      };
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
}
