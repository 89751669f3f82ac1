import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import type { KvBackend, TxnSpec } from './backend.js';
import { CombiningBackend } from './combining-backend.js';
import { requestPathOf } from './etcd-store.js';
import { cmp, op } from './kv.js';
import { needsQuotaGuard, QuotaGuardBackend, quotaGuarded } from './quota-guard.js';

const GUARD = 'p/guard/nospace';

/** A memory etcd with a small quota, its NOSPACE alarm raised by a flat put that would cross it. */
async function fullEtcd(): Promise<{ cluster: MemoryEtcd; raw: KvBackend }> {
  const timers = new ManualTimers(new ManualClock(1_000));
  const cluster = new MemoryEtcd({ clock: timers.clock, timers, quotaBytes: 64 * 1024 });
  const raw = cluster.connect();
  await raw.txn({ compare: [], success: [op.put('p/old/1', 'x'.repeat(20_000)), op.put('p/old/2', '2')] });
  await expect(raw.txn({ compare: [], success: [op.put('p/big', 'x'.repeat(60_000))] })).rejects.toMatchObject({
    failure: 'no-space',
  });
  expect((await raw.status()).noSpaceAlarm).toBe(true);
  return { cluster, raw };
}

/** Two items, as `Kv.txnEach` sends them: one nested txn each, no top-level compares. */
const batchOfPuts = (a: string, b: string): TxnSpec => ({
  compare: [],
  success: [
    op.txn({ compare: [cmp.absent(a)], success: [op.put(a, 'v')] }),
    op.txn({ compare: [cmp.absent(b)], success: [op.put(b, 'v')] }),
  ],
});

const stored = async (backend: KvBackend, prefix: string): Promise<number> =>
  (await backend.range(prefix, { limit: 100 })).kvs.length;

describe('quota guard: requests of nested puts', () => {
  it('needs a guard only when the puts are all nested and no compare or failure list could run it', () => {
    expect(needsQuotaGuard(batchOfPuts('p/a', 'p/b'))).toBe(true);
    expect(
      needsQuotaGuard({
        compare: [],
        success: [op.txn({ compare: [], success: [op.txn(batchOfPuts('p/a', 'p/b'))] })],
      }),
    ).toBe(true);
    expect(needsQuotaGuard({ compare: [], success: [op.put('p/a', 'v'), op.txn(batchOfPuts('p/b', 'p/c'))] })).toBe(
      false,
    );
    expect(needsQuotaGuard({ compare: [cmp.absent('p/a')], success: [op.txn(batchOfPuts('p/a', 'p/b'))] })).toBe(false);
    expect(needsQuotaGuard({ compare: [], success: [op.txn({ compare: [], success: [op.del('p/a')] })] })).toBe(false);
    expect(needsQuotaGuard({ compare: [], success: [op.get('p/a')] })).toBe(false);
    const nestedFailurePut = {
      compare: [],
      success: [op.txn({ compare: [cmp.absent('p/a')], success: [], failure: [op.put('p/b', 'v')] })],
    };
    expect(needsQuotaGuard(nestedFailurePut)).toBe(true);
    expect(quotaGuarded(batchOfPuts('p/a', 'p/b'), GUARD).failure).toEqual([op.put(GUARD, '')]);
  });

  it('etcd (as the memory etcd models it) stores nested puts with the alarm raised; the guard makes it refuse them', async () => {
    const { raw } = await fullEtcd();
    // etcd 3.4 charges only top-level puts against the quota: this is the hole.
    await expect(raw.txn(batchOfPuts('p/raw/a', 'p/raw/b'))).resolves.toMatchObject({ succeeded: true });
    expect(await stored(raw, 'p/raw/')).toBe(2);

    const guarded = new QuotaGuardBackend(raw, GUARD);
    await expect(guarded.txn(batchOfPuts('p/new/a', 'p/new/b'))).rejects.toMatchObject({ failure: 'no-space' });
    expect(await stored(raw, 'p/new/')).toBe(0);
    expect(await stored(raw, 'p/guard/')).toBe(0);
    // Deletes still go through, nested or not (the runbook frees space this way).
    const deletes: TxnSpec = {
      compare: [],
      success: [
        op.txn({ compare: [], success: [op.del('p/old/1')] }),
        op.txn({ compare: [], success: [op.del('p/old/2')] }),
      ],
    };
    await expect(guarded.txn(deletes)).resolves.toMatchObject({ succeeded: true });
    expect(await stored(raw, 'p/old/')).toBe(0);
  });

  it("the daemon's request path refuses combined and batched puts with the alarm raised, with or without combining", async () => {
    for (const combinedRequests of [0, 1]) {
      const { raw } = await fullEtcd();
      const path = requestPathOf(raw, { prefix: 'p/', combinedRequests, maxResponseBytes: 1 << 26 });
      expect(path).toBeInstanceOf(combinedRequests === 0 ? QuotaGuardBackend : CombiningBackend);
      // Two flat submits-to-be in one turn: combined into one request of nested txns when combining is on.
      const flat = (key: string): TxnSpec => ({ compare: [cmp.absent(key)], success: [op.put(key, 'v')] });
      const results = await Promise.allSettled([
        path.txn(flat('p/s/1')),
        path.txn(flat('p/s/2')),
        path.txn(batchOfPuts('p/g/1', 'p/g/2')),
      ]);
      expect(
        results.map((r) => (r.status === 'rejected' ? (r.reason as { failure?: string }).failure : 'stored')),
      ).toEqual(['no-space', 'no-space', 'no-space']);
      expect(await stored(raw, 'p/s/')).toBe(0);
      expect(await stored(raw, 'p/g/')).toBe(0);
    }
  });
});
