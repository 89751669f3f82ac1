/**
 * The quota guard against a real etcd (3.4) with a small `--quota-backend-bytes`, its NOSPACE
 * alarm raised by a flat put: etcd itself stores a request whose puts are all nested (its quota
 * counts top-level puts only), and refuses the same request once it carries the guard.
 */
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TxnSpec } from './backend.js';
import { EtcdBackend } from './etcd-backend.js';
import { cmp, op } from './kv.js';
import { QuotaGuardBackend } from './quota-guard.js';

const QUOTA = 4 * 1024 * 1024;
let etcd: EtcdHandle;
let backend: EtcdBackend;

beforeAll(async () => {
  etcd = await startEtcd({ extraArgs: ['--quota-backend-bytes', String(QUOTA)] });
  backend = new EtcdBackend({
    endpoints: etcd.endpoints,
    requestTimeoutMs: 5_000,
    maxResponseBytes: 64 * 1024 * 1024,
    log: pino({ level: 'silent' }),
  });
  // Fill with flat puts of 256 KiB until etcd refuses one: the alarm is raised.
  const value = 'f'.repeat(256 * 1024);
  for (let i = 0; i < 64; i += 1) {
    try {
      await backend.txn({ compare: [], success: [op.put(`fill/${i}`, value)] });
    } catch (err) {
      expect(err).toMatchObject({ failure: 'no-space' });
      break;
    }
  }
  expect((await backend.status()).noSpaceAlarm).toBe(true);
}, 60_000);

afterAll(async () => {
  backend.close();
  await etcd.stop();
});

const batchOfPuts = (a: string, b: string): TxnSpec => ({
  compare: [],
  success: [
    op.txn({ compare: [cmp.absent(a)], success: [op.put(a, 'v')] }),
    op.txn({ compare: [cmp.absent(b)], success: [op.put(b, 'v')] }),
  ],
});

const count = async (prefix: string): Promise<number> => (await backend.range(prefix, { limit: 100 })).kvs.length;

describe('quota guard on a real etcd at NOSPACE', () => {
  it('a flat put is refused', async () => {
    await expect(backend.txn({ compare: [], success: [op.put('flat/a', 'v')] })).rejects.toMatchObject({
      failure: 'no-space',
    });
  });

  it('etcd stores a request of nested puts with the alarm raised (the hole the guard closes)', async () => {
    await expect(backend.txn(batchOfPuts('raw/a', 'raw/b'))).resolves.toMatchObject({ succeeded: true });
    expect(await count('raw/')).toBe(2);
  });

  it('the same request with the guard is refused: nothing stored, the guard key never written', async () => {
    const guarded = new QuotaGuardBackend(backend, 'guard/nospace');
    await expect(guarded.txn(batchOfPuts('new/a', 'new/b'))).rejects.toMatchObject({ failure: 'no-space' });
    expect(await count('new/')).toBe(0);
    expect(await count('guard/')).toBe(0);
  });

  it('a guarded request of nested deletes goes through (space can be freed)', async () => {
    const guarded = new QuotaGuardBackend(backend, 'guard/nospace');
    const deletes: TxnSpec = {
      compare: [],
      success: [
        op.txn({ compare: [], success: [op.del('fill/0')] }),
        op.txn({ compare: [], success: [op.del('fill/1')] }),
      ],
    };
    await expect(guarded.txn(deletes)).resolves.toMatchObject({ succeeded: true });
    expect((await backend.range('fill/0', { limit: 1 })).kvs.filter((kv) => kv.key === 'fill/0')).toHaveLength(0);
  });
});
