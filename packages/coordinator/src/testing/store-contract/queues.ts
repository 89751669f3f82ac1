/**
 * The LeaseStore contract: the queue field (issue 25; see ../store-contract.ts). The queue lives in
 * the lean task record, written only when it is not `default`, kept by every later write of the
 * task (grant, cancel), and read back by the snapshot; records without it — every record written
 * before queues, of either layout — are `default`'s, with no rewrite (the reading rule is the
 * migration).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { cancelled, newTask } from '../../core/lifecycle.js';
import { entryOf } from '../../core/index-entry.js';
import { encodeTask, queueOf } from '../../core/task-record.js';
import { op } from '../../etcd/kv.js';
import type { KvLeaseStore } from '../../etcd/lease-store.js';
import { payloadDigest } from '../../payload-digest.js';
import { ENV, legacyRecord, PAYLOAD, type Tools } from './fixtures.js';

export function describeQueues(t: Tools): void {
  const { open, job, grantOne } = t;
  describe('queues', () => {
    let store: KvLeaseStore;
    beforeEach(() => {
      store = t.store();
    });
    const submitTo = async (taskId: string, queue: string | undefined) => {
      const record = newTask(
        {
          taskId,
          resource: `r-${taskId}`,
          queue,
          payloadBytes: Buffer.byteLength(JSON.stringify(PAYLOAD)),
          payloadDigest: payloadDigest(PAYLOAD),
        },
        ENV,
      );
      expect((await store.submitTasks([{ record, payloadJson: JSON.stringify(PAYLOAD) }])).kind).toBe('created');
      const task = await store.task(taskId);
      if (task === undefined) throw new Error('not stored');
      return task;
    };

    it('keeps the queue in the task record through a grant and a cancel, and in the snapshot', async () => {
      const s = await open();
      const task = await submitTo('q1', 'emails');
      expect(task.record.queue).toBe('emails');
      const g = await grantOne(job(s, task, 'req-q1'));
      if (g.kind !== 'granted') throw new Error(g.kind);
      const held = await store.task('q1');
      expect(held?.record).toMatchObject({ queue: 'emails', attempts: 1 });
      if (held === undefined) throw new Error('gone');
      const res = await store.cancelTask({
        task: held.record,
        taskModRevision: held.modRevision,
        owner: { sessionId: s.sessionId, token: g.token, requestId: 'req-q1' },
        next: cancelled(held.record, g.token, ENV.nowMs),
      });
      expect(res.kind).toBe('cancelled');
      const seen: { taskId: string; queue: string }[] = [];
      await store.snapshot((tasks) => {
        for (const x of tasks) seen.push({ taskId: x.record.taskId, queue: queueOf(x.record) });
      });
      expect(seen).toEqual([{ taskId: 'q1', queue: 'emails' }]);
      expect(entryOf((await store.task('q1'))!, DEFAULT_RETRY_POLICY)).toMatchObject({
        state: 'cancelled',
        queue: 'emails',
      });
    });

    it('writes no queue for default: the record is byte for byte what a coordinator before queues wrote', async () => {
      const task = await submitTo('d1', undefined);
      const named = await submitTo('d2', 'default');
      expect(task.value).not.toContain('"queue"');
      expect(named.value).not.toContain('"queue"');
      expect(queueOf(task.record)).toBe('default');
    });

    it('reads records written before queues (v2 without a queue, v1) as default, and a v1 converted stays default', async () => {
      const before = newTask(
        { taskId: 'old2', resource: 'r-old2', payloadBytes: 5, payloadDigest: payloadDigest(PAYLOAD) },
        ENV,
      );
      const { queue: _none, ...withoutQueue } = before;
      await store.kv.txn('test', {
        compare: [],
        success: [
          op.put(store.keys.task('old2'), encodeTask(withoutQueue)),
          op.put(store.keys.input('old2'), JSON.stringify(PAYLOAD)),
          op.put(store.keys.task('old1'), legacyRecord('old1', 'r-old1')),
        ],
      });
      const v2 = await store.task('old2');
      const v1 = await store.task('old1');
      if (v2 === undefined || v1?.legacy === undefined) throw new Error('not read');
      expect(entryOf(v2, DEFAULT_RETRY_POLICY)).toMatchObject({ state: 'pending', queue: 'default' });
      expect(entryOf(v1, DEFAULT_RETRY_POLICY)).toMatchObject({ state: 'pending', queue: 'default' });
      expect(await store.migrateTasks([{ modRevision: v1.modRevision, record: v1.record, legacy: v1.legacy }])).toBe(1);
      const converted = await store.task('old1');
      expect(converted?.legacy).toBeUndefined();
      expect(queueOf(converted!.record)).toBe('default');
    });
  });
}
