import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { settle } from '../testing/settle.js';
import { describe, expect, it } from 'vitest';
import { describeStoreContract, legacyRecord } from '../testing/store-contract.js';
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
