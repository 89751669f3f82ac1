import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { describeStoreContract } from '../testing/store-contract.js';
import { EtcdBackend } from './etcd-backend.js';

let etcd: EtcdHandle;
beforeAll(async () => {
  etcd = await startEtcd();
});
afterAll(async () => {
  await etcd.stop();
});

describeStoreContract('etcd', () => {
  const backend = new EtcdBackend({
    endpoints: etcd.endpoints,
    requestTimeoutMs: 5_000,
    maxResponseBytes: 64 * 1024 * 1024,
    log: pino({ level: 'silent' }),
  });
  return Promise.resolve({
    backend,
    pass: (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
    close: () => {
      backend.close();
      return Promise.resolve();
    },
  });
});
