import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { settle } from '../testing/settle.js';
import { describe, expect, it } from 'vitest';
import { describeStoreContract, legacyRecord } from '../testing/store-contract.js';
import { sessionRecord, taskRecord } from '../testing/store-contract/fixtures.js';
import type { FinishJob, GrantJob } from '../store/port.js';
import { finishAttempts } from './transactions/lease-txns.js';
import { requestPathOf } from './etcd-store.js';
import { KeyLayout } from './keys.js';
import { op } from './kv.js';
import { KvLeaseStore } from './lease-store.js';

describeStoreContract('in-memory etcd', () => {
  const timers = new ManualTimers(new ManualClock(1_000));
  const cluster = new MemoryEtcd({ clock: timers.clock, timers });
  return Promise.resolve({
    backend: cluster.connect(),
    pass: (ms: number) => timers.advance(ms, () => settle(3)).then(() => settle()),
    close: () => Promise.resolve(),
  });
});

// The same contract with write txns sharing requests, as the daemon sends them, under the smallest
// receive limit the coordinator accepts (ETCD_MAX_RESPONSE_BYTES 4 MiB): its grant batches' payloads
// are bounded per reply, so two 1.4 MB grant txns do not share one.
describeStoreContract('in-memory etcd, write txns combined, 4 MiB receive limit', () => {
  const timers = new ManualTimers(new ManualClock(1_000));
  const cluster = new MemoryEtcd({ clock: timers.clock, timers });
  const limit = 4 * 1024 * 1024;
  return Promise.resolve({
    backend: requestPathOf(cluster.connect({ maxResponseBytes: limit }), {
      prefix: 'contract/',
      combinedRequests: 1,
      maxResponseBytes: limit,
    }),
    pass: (ms: number) => timers.advance(ms, () => settle(3)).then(() => settle()),
    close: () => Promise.resolve(),
  });
});

describe('KvLeaseStore reads under a small receive limit (in-memory etcd)', () => {
  it('tasksByIds reads records of layout v1 larger than one reply in halves', async () => {
    const timers = new ManualTimers(new ManualClock(1_000));
    const cluster = new MemoryEtcd({ clock: timers.clock, timers });
    const keys = new KeyLayout('limited/');
    const writer = new KvLeaseStore(cluster.connect(), keys);
    const ids = Array.from({ length: 6 }, (_, i) => `big/${i}`);
    for (const id of ids) {
      await writer.kv.txn('test', {
        compare: [],
        success: [op.put(keys.task(id), legacyRecord(id, `r/${id}`, { payload: { pad: 'x'.repeat(300_000) } }))],
      });
    }
    // 6 × 300 KB in one reply would be 1.8 MB; the client takes 1 MB at most.
    const reader = new KvLeaseStore(cluster.connect({ maxResponseBytes: 1_000_000 }), keys);
    const read = await reader.tasksByIds(ids);
    expect(read.map((t) => t.record.taskId)).toEqual(ids);
    expect(read.every((t) => t.legacy !== undefined)).toBe(true);
  });
});

describe('finishAttempts refuses a batch that writes one key twice (etcd would refuse the whole request)', () => {
  it('two finishes of one resource, or a carried grant of the resource its own finish frees', async () => {
    const timers = new ManualTimers(new ManualClock(1_000));
    const store = new KvLeaseStore(new MemoryEtcd({ clock: timers.clock, timers }).connect(), new KeyLayout('g/'));
    const s = await store.openSession(sessionRecord('w1'), 10);
    const base = { sessionId: s.sessionId, leaseId: s.leaseId, token: 5n, taskModRevision: 5n };
    const finish = (taskId: string, resource: string, requestId: string): FinishJob => ({
      ...base,
      resource,
      requestId,
      next: taskRecord(taskId, resource),
    });
    const grant = (taskId: string, resource: string): GrantJob => ({
      sessionId: s.sessionId,
      leaseId: s.leaseId,
      sessionModRevision: s.modRevision,
      requestId: 'q-next',
      task: taskRecord(taskId, resource),
      taskModRevision: 4n,
      next: taskRecord(taskId, resource),
      owner: {
        v: 1,
        taskId,
        sessionId: s.sessionId,
        workerId: 'w1',
        incarnation: 'i',
        requestId: 'q-next',
        attempt: 1,
      },
    });
    await expect(
      finishAttempts(store.kv, store.keys, [finish('t1', 'r1', 'q1'), finish('t2', 'r1', 'q2')]),
    ).rejects.toThrow(RangeError);
    await expect(
      finishAttempts(store.kv, store.keys, [{ ...finish('t1', 'r1', 'q1'), carried: grant('t3', 'r1') }]),
    ).rejects.toThrow(RangeError);
    await expect(
      finishAttempts(store.kv, store.keys, [finish('t1', 'r1', 'q1'), finish('t2', 'r2', 'q2')]),
    ).resolves.toEqual([{ kind: 'notHolder' }, { kind: 'notHolder' }]);
  });
});
