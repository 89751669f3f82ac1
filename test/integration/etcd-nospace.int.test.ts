/**
 * etcd at its quota (a real etcd started with `--quota-backend-bytes` 8 MiB, its NOSPACE alarm
 * raised by the coordinator's own submits): what the coordinator does, and that it recovers by
 * itself once an operator has freed space, compacted, defragmented and disarmed the alarm.
 *
 * - submits: 503 `STORAGE_FULL` (retryable, Retry-After), nothing stored;
 * - grants fail safe, alone or batched (a request of nested txns, which etcd's quota does not
 *   count: the coordinator's quota guard makes it): the grant txn is refused, so no owner key and
 *   no fence advance — and no `lease.granted`; a held lease renews (reads and keepalives work)
 *   but cannot complete yet;
 * - reads still work: the task view, the list, /readyz;
 * - the refusals are answers, not unavailability: the worker's socket stays open (no hand-off),
 *   `leasehold_coordinator_etcd_healthy` stays 1, and the db size metrics show the quota reached;
 * - purge (deletes only) works at NOSPACE; after compaction, defragmentation and `alarm disarm`
 *   the same requests succeed, with no coordinator restart.
 */
import type { Grant } from '@leasehold/protocol';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AdminClient, TestWorker } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/etcd-nospace/';
const QUOTA = 8 * 1024 * 1024;
const FILLER = { pad: 'f'.repeat(200 * 1024) };

const stack = useStack({
  prefix: PREFIX,
  sessionTtlMs: 30_000,
  etcd: { extraArgs: ['--quota-backend-bytes', String(QUOTA)] },
});
let admin: AdminClient;
let url: string;
let raw: Etcd3;
let metrics: () => Promise<string>;

beforeAll(async () => {
  const c = await stack.coordinator({
    LEASEHOLD_COORDINATOR_ETCD_QUOTA_BYTES: String(QUOTA),
    LEASEHOLD_COORDINATOR_ETCD_STATUS_INTERVAL_MS: '200',
    LEASEHOLD_COORDINATOR_RETENTION: 'false',
    // A short etcd-health judgement: refusals counted as silence would hand the sessions off at once.
    LEASEHOLD_COORDINATOR_ETCD_GIVE_UP_MS: '300',
  });
  url = c.url;
  admin = stack.admin(url);
  metrics = () => c.metrics.registry.metrics();
  raw = new Etcd3({ hosts: stack.etcd.endpoints });
}, 60_000);

afterAll(async () => {
  raw.close();
});

function gauge(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

describe('etcd at its quota', () => {
  let holder: TestWorker;
  let held: Grant;
  let filled = 0;

  it('fills etcd through the API until submits are refused with 503 STORAGE_FULL', async () => {
    expect((await admin.submit('held', 'ns/held')).status).toBe(201);
    expect((await admin.submit('waiting', 'ns/waiting')).status).toBe(201);
    expect((await admin.submit('waiting-b', 'ns/waiting-b')).status).toBe(201);
    holder = await stack.worker(url, 'holder');
    held = (await holder.acquire('q-held', 'held')) as Grant;
    expect(held.type).toBe('lease.granted');
    let refused: { status: number; body: { code?: string; retryable?: boolean } } | undefined;
    for (let i = 0; i < 100 && refused === undefined; i += 1) {
      const reply = await admin.submit(`filler/${i}`, `ns/f${i}`, FILLER);
      if (reply.status !== 201) refused = reply;
      // Cancelled, to be purged later (the quota may be reached by the cancel itself).
      else if ((await admin.cancel(`filler/${i}`)).status === 200) filled += 1;
    }
    expect(filled).toBeGreaterThan(5);
    expect(refused).toMatchObject({ status: 503, body: { code: 'STORAGE_FULL', retryable: true } });
    const again = await admin.call('POST', '/v1/tasks', { taskId: 'late', resource: 'ns/late', payload: { n: 1 } });
    expect(again).toMatchObject({ status: 503, body: { code: 'STORAGE_FULL' } });
    expect((await admin.task('late')).status).toBe(404);
  }, 60_000);

  it('grants fail safe: no grant, no owner key, no fence advance', async () => {
    const w = await stack.worker(url, 'latecomer').catch((err: unknown) => err);
    // A new session needs a lease: refused too. The holder's session (opened before) is used.
    expect(w).toBeInstanceOf(Error);
    // Two acquires at once: their grants go as one etcd request of nested txns (a grant batch, or
    // a combined request), and etcd's quota counts only top-level puts: refused because the
    // coordinator guards such requests (etcd/quota-guard.ts).
    const replies = await Promise.all([
      holder.acquire('q-waiting', 'waiting'),
      holder.acquire('q-waiting-b', 'waiting-b'),
    ]);
    for (const reply of replies) expect(reply).toMatchObject({ type: 'error', code: 'STORAGE_FULL', retryable: true });
    for (const [taskId, resource] of [
      ['waiting', 'ns/waiting'],
      ['waiting-b', 'ns/waiting-b'],
    ] as const) {
      expect(holder.received.some((m) => m.type === 'lease.granted' && m.taskId === taskId)).toBe(false);
      expect((await admin.resource(resource)).body).toMatchObject({ owner: null, token: null });
      expect((await stack.sinkClient.getResource(resource)).fence).toBe(0n);
    }
  });

  it('reads, renewals and keepalives go on; the refusals hand no session off', async () => {
    expect((await admin.task('held')).body).toMatchObject({ state: 'leased', owner: { token: held.token } });
    expect((await admin.list('?limit=5')).status).toBe(200);
    expect((await admin.call('GET', '/readyz')).status).toBe(200);
    expect(await holder.renew(held.resource, held.token)).toMatchObject({ type: 'lease.renewed' });
    expect(await holder.heartbeat()).toMatchObject({ type: 'heartbeat.ack' });
    // The holder can not record its completion yet (a write): refused, retryable, lease kept.
    expect(await holder.complete(held, 'task:held')).toMatchObject({ type: 'error', code: 'STORAGE_FULL' });
    const text = await waitFor('the NOSPACE alarm in the metrics', async () => {
      const t = await metrics();
      return gauge(t, 'leasehold_coordinator_etcd_nospace_alarm') === 1 ? t : undefined;
    });
    // Refusals in a row (a breaker counting them would open after a few, and fail everything for
    // a second), for longer than ETCD_GIVE_UP_MS (300) and several etcd health probes: every
    // answer still STORAGE_FULL, etcd still judged healthy. Each refusal is an answer awaited,
    // not a sleep; the span is measured.
    const started = performance.now();
    for (let i = 0; i < 6 || performance.now() - started < 3 * 300; i += 1) {
      const reply = await admin.call('POST', '/v1/tasks', { taskId: `row/${i}`, resource: 'ns/row', payload: 1 });
      expect(reply).toMatchObject({ status: 503, body: { code: 'STORAGE_FULL' } });
      expect(gauge(await metrics(), 'leasehold_coordinator_etcd_healthy')).toBe(1);
    }
    expect(gauge(text, 'leasehold_coordinator_etcd_quota_bytes')).toBe(QUOTA);
    expect(gauge(text, 'leasehold_coordinator_etcd_quota_used_ratio')).toBeGreaterThan(0.9);
    expect(gauge(text, 'leasehold_coordinator_etcd_db_size_bytes')).toBeGreaterThan(QUOTA * 0.9);
    expect(text).toMatch(/leasehold_coordinator_etcd_errors_total\{failure="no_space"\} [1-9]/);
    expect(holder.socket.readyState).toBe(holder.socket.OPEN);
    expect(holder.received.some((m) => m.type === 'session.expired')).toBe(false);
  });

  it('recovers by itself after purge, compaction, defragmentation and alarm disarm', async () => {
    // Deletes work at NOSPACE: the operator removes ended tasks first.
    const purged = await admin.call('POST', '/v1/tasks/purge', { state: 'cancelled', olderThanMs: 0, limit: 1000 });
    expect(purged).toMatchObject({ status: 200, body: { purged: filled, more: false } });
    const { header } = await raw.maintenance.status();
    await raw.kv.compact({ revision: header.revision, physical: true });
    await raw.maintenance.defragment();
    // `etcdctl alarm disarm`: each raised alarm deactivated by its member id.
    const { alarms } = await raw.maintenance.alarm({ action: 'Get', memberID: 0, alarm: 'None' });
    expect(alarms.length).toBeGreaterThan(0);
    for (const a of alarms) await raw.maintenance.alarm({ action: 'Deactivate', memberID: a.memberID, alarm: a.alarm });
    expect((await admin.submit('after', 'ns/after')).status).toBe(201);
    expect(await holder.complete(held, 'task:held')).toMatchObject({ type: 'task.completed' });
    const g = (await holder.acquire('q-waiting-2', 'waiting')) as Grant;
    expect(g.type).toBe('lease.granted');
    expect((await stack.sinkClient.getResource('ns/waiting')).fence).toBe(BigInt(g.token));
    await waitFor('the alarm cleared in the metrics', async () =>
      gauge(await metrics(), 'leasehold_coordinator_etcd_nospace_alarm') === 0 ? true : undefined,
    );
  }, 60_000);
});
