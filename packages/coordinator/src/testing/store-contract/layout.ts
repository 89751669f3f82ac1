/** The LeaseStore contract: layout v1 (see ../store-contract.ts). */
import { beforeEach, describe, expect, it } from 'vitest';
import { completed } from '../../core/lifecycle.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { ENV, legacyRecord, type Tools } from './fixtures.js';

export function describeLayoutV1(t: Tools): void {
  const { open, job, current, grantOne, proofOf } = t;
  describe('layout v1', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    async function putLegacy(taskId: string, resource: string, over: Record<string, unknown> = {}) {
      await store.kv.txn('test', {
        compare: [],
        success: [op.put(store.keys.task(taskId), legacyRecord(taskId, resource, over))],
      });
      const t = await store.task(taskId);
      if (t?.legacy === undefined) throw new Error('not read as a v1 record');
      return t;
    }
    const HISTORY = [
      { attempt: 1, workerId: 'w0', token: '3', outcome: 'released', startedAtMs: 1, endedAtMs: 2 },
      { attempt: 1, workerId: 'w0', token: '4', outcome: 'expired', startedAtMs: 3, endedAtMs: 4 },
    ];

    it('reads a v1 record as its v2 shape, and migrateTasks moves payload and history out (once)', async () => {
      const old = await putLegacy('old', 'r-old', { history: HISTORY });
      expect(old.record).toMatchObject({ v: 2, endedAttempts: 2, last: { token: '4' } });
      const item = { modRevision: old.modRevision, record: old.record, legacy: old.legacy };
      if (item.legacy === undefined) throw new Error('legacy');
      expect(await store.migrateTasks([{ ...item, legacy: item.legacy }])).toBe(1);
      const now = await current('old');
      expect(now.legacy).toBeUndefined();
      expect(now.value).not.toContain('payload"');
      const detail = await store.taskDetail('old');
      expect(detail?.payload).toEqual({ legacy: 'old' });
      expect(detail?.history.map((h) => h.token)).toEqual(['3', '4']);
      // A second conversion from the same read is a failed compare: nothing changes.
      expect(await store.migrateTasks([{ ...item, legacy: item.legacy }])).toBe(0);
      expect((await current('old')).modRevision).toBe(now.modRevision);
    });

    it('a held v1 record is converted by the txn that ends its attempt', async () => {
      const s = await open();
      const old = await putLegacy('held', 'r-held', { history: HISTORY });
      const g = await grantOne(job(s, old, 'q'));
      if (g.kind !== 'granted') throw new Error(g.kind);
      // The grant of a v1 record wrote the v2 shape; make it a v1 open attempt again, as an old
      // coordinator's grant would have left it.
      await store.kv.txn('test', {
        compare: [],
        success: [
          op.put(
            store.keys.task('held'),
            legacyRecord('held', 'r-held', {
              history: HISTORY,
              attempts: 1,
              open: { attempt: 1, workerId: 'w1', sessionId: s.sessionId, startedAtMs: 5 },
            }),
          ),
        ],
      });
      const read = await current('held');
      if (read.legacy === undefined) throw new Error('legacy');
      const [r] = await store.finish([
        {
          ...proofOf(s, 'r-held', { token: g.token, requestId: 'q' }),
          taskModRevision: read.modRevision,
          next: completed(read.record, g.token, 'task:held', ENV.nowMs),
          legacy: read.legacy,
        },
      ]);
      expect(r?.ok && r.value.kind).toBe('done');
      const detail = await store.taskDetail('held');
      expect(detail?.task.legacy).toBeUndefined();
      expect(detail?.payload).toEqual({ legacy: 'held' });
      expect(detail?.history.map((h) => h.outcome)).toEqual(['released', 'expired', 'completed']);
    });
  });
}
