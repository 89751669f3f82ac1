import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeBackendContract } from '../testing/backend-contract.js';
import { EtcdBackend } from './etcd-backend.js';
import { op } from './kv.js';

let etcd: EtcdHandle;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd.stop();
});

describeBackendContract('etcd', (options = {}) => {
  const backend = new EtcdBackend({
    endpoints: etcd.endpoints,
    requestTimeoutMs: 5_000,
    maxResponseBytes: options.maxResponseBytes ?? 64 * 1024 * 1024,
    log: pino({ level: 'silent' }),
  });
  return Promise.resolve({
    backend,
    pass: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    compact: async (revision: bigint) => {
      await backend.client.kv.compact({ revision: revision.toString(), physical: true });
    },
    close: () => {
      backend.close();
      return Promise.resolve();
    },
  });
});

// Both ways etcd refuses a request too large are "refused before applying" (request-too-large, which
// the combiner answers by sending its txns one by one), never an unknown outcome: over
// --max-request-bytes (1.5 MiB) etcd says so itself; over its gRPC receive limit (+ 512 KiB) the
// gRPC server refuses the message unread, in words that resemble the client's reply limit.
describe("EtcdBackend: requests over etcd's limits", () => {
  it.each([
    ['over --max-request-bytes', 1_700_000],
    ['over the gRPC receive limit', 2_600_000],
  ])('%s (%i bytes): request-too-large, nothing stored', async (_what, size) => {
    const backend = new EtcdBackend({
      endpoints: etcd.endpoints,
      requestTimeoutMs: 5_000,
      maxResponseBytes: 64 * 1024 * 1024,
      log: pino({ level: 'silent' }),
    });
    try {
      const key = `too-large/${size}`;
      await expect(backend.txn({ compare: [], success: [op.put(key, 'x'.repeat(size))] })).rejects.toMatchObject({
        failure: 'request-too-large',
      });
      expect((await backend.range(key, { limit: 1 })).kvs).toHaveLength(0);
    } finally {
      backend.close();
    }
  });
});
