/**
 * Proves the etcd harness gives a real etcd: put, txn, lease expiry and watch through the etcd3
 * client, with revisions handled as bigint (never Number).
 */
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/etcd-harness/';
let etcd: EtcdHandle;
let client: Etcd3;

beforeAll(async () => {
  etcd = await startEtcd();
  client = new Etcd3({ hosts: etcd.endpoints });
});

afterAll(async () => {
  client.close();
  await etcd.stop();
});

describe('etcd harness', () => {
  it('serves put and get with growing revisions compared as bigint', async () => {
    const first = await client.put(`${PREFIX}a`).value('1').exec();
    const second = await client.put(`${PREFIX}a`).value('2').exec();
    const r1 = BigInt(first.header.revision);
    const r2 = BigInt(second.header.revision);
    expect(r2).toBeGreaterThan(r1);
    const got = await client.get(`${PREFIX}a`).exec();
    const kv = got.kvs[0]!;
    expect(kv.value.toString()).toBe('2');
    expect(BigInt(kv.create_revision)).toBe(r1);
    expect(BigInt(kv.mod_revision)).toBe(r2);
  });

  it('compares a whole key range (what endSession relies on): every key, and an empty range passes', async () => {
    const prefix = `${PREFIX}range/`;
    const txn = (before: bigint) =>
      client.kv.txn({
        compare: [
          {
            key: Buffer.from(prefix),
            range_end: Buffer.from(`${prefix.slice(0, -1)}0`), // '/' + 1
            target: 'Create',
            result: 'Less',
            create_revision: before.toString(),
          },
        ],
        success: [],
        failure: [],
      });
    const empty = await txn(1n);
    expect(empty.succeeded).toBe(true);
    const a = BigInt((await client.put(`${prefix}a`).value('1').exec()).header.revision);
    const b = BigInt((await client.put(`${prefix}b`).value('1').exec()).header.revision);
    expect((await txn(b + 1n)).succeeded).toBe(true);
    expect((await txn(b)).succeeded).toBe(false); // b was created at b: not before it
    expect((await txn(a + 1n)).succeeded).toBe(false);
  });

  it('runs a create-if-absent txn exactly once', async () => {
    const key = `${PREFIX}owner`;
    const attempt = () =>
      client.if(key, 'Create', '==', 0).then(client.put(key).value('w1')).else(client.get(key)).commit();
    const a = await attempt();
    const b = await attempt();
    expect(a.succeeded).toBe(true);
    expect(b.succeeded).toBe(false);
    expect(BigInt(b.header.revision)).toBe(BigInt(a.header.revision));
  });

  it('deletes a key attached to a 1 s lease after the lease expires', async () => {
    const lease = client.lease(1, { autoKeepAlive: false });
    await lease.put(`${PREFIX}leased`).value('x').exec();
    expect(await client.get(`${PREFIX}leased`).string()).toBe('x');
    await waitFor(
      'the key gone with its lease',
      async () => (await client.get(`${PREFIX}leased`).string()) === null,
      10_000,
    );
  });

  it('delivers watch events with their revisions', async () => {
    const watcher = await client.watch().key(`${PREFIX}watched`).create();
    try {
      const seen = new Promise<bigint>((resolve) => {
        watcher.on('put', (kv) => {
          resolve(BigInt(kv.mod_revision));
        });
      });
      const put = await client.put(`${PREFIX}watched`).value('v').exec();
      expect(await seen).toBe(BigInt(put.header.revision));
    } finally {
      await watcher.cancel();
    }
  });

  it('reports where it came from and real endpoints', () => {
    expect(['binary', 'external', 'container']).toContain(etcd.source);
    for (const url of etcd.endpoints) expect(url).toMatch(/^http:\/\/(127\.0\.0\.1|localhost|\[::1\]):\d+$/);
  });
});
