/**
 * Retention of ended tasks on a real etcd with two coordinators sweeping, a real sink and SDK
 * workers: completed tasks disappear from etcd (record, payload, history) by age, failed ones by
 * count (the newest stay), while every result stays at the sink and its decision log; a task's own
 * rule keeps it; and retries racing the sweeps never lose a task.
 *
 * Mechanisms: RetentionService + planRetention (age, count), the `purgeTasks` compare, the
 * retention lock. Remove the compare and the racing retries lose tasks (the unit twin in
 * service/retention.test.ts shows it deterministically).
 */
import type { Coordinator } from '@leasehold/coordinator';
import { LeaseholdClient } from '@leasehold/client';
import { NonRetryableError, Worker } from '@leasehold/worker';
import { Etcd3 } from 'etcd3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allDecisions } from '../harness/cluster.js';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/retention/';
const RETENTION = {
  LEASEHOLD_COORDINATOR_RETENTION: 'true',
  LEASEHOLD_COORDINATOR_RETENTION_COMPLETED_MS: '1500',
  LEASEHOLD_COORDINATOR_RETENTION_COMPLETED_COUNT: 'off',
  LEASEHOLD_COORDINATOR_RETENTION_FAILED_MS: 'off',
  LEASEHOLD_COORDINATOR_RETENTION_FAILED_COUNT: '3',
  LEASEHOLD_COORDINATOR_RETENTION_CANCELLED_MS: 'off',
  LEASEHOLD_COORDINATOR_RETENTION_CANCELLED_COUNT: 'off',
  LEASEHOLD_COORDINATOR_RETENTION_MIN_AGE_MS: '0',
  LEASEHOLD_COORDINATOR_RETENTION_INTERVAL_MS: '150',
  LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS: '1',
};

const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let c1: Coordinator;
let c2: Coordinator;
let admin: LeaseholdClient;
let raw: Etcd3;
const workers: Worker[] = [];
/** Race tasks fail their first run only. */
const ranOnce = new Set<string>();

beforeAll(async () => {
  c1 = await stack.coordinator(RETENTION);
  c2 = await stack.coordinator(RETENTION);
  admin = new LeaseholdClient({ url: c1.url, adminKey: stack.keys.adminKey });
  raw = new Etcd3({ hosts: stack.etcd.endpoints });
  for (const url of [c1.url, c2.url]) {
    const w = new Worker({
      coordinators: [url],
      sink: { url: stack.sinkUrl },
      credentials: { workerKey: stack.keys.workerKey },
      workerId: `ret-${workers.length}`,
      handler: (task) => {
        const payload = task.payload as { fail?: boolean; failOnce?: boolean; n: number };
        if (payload.fail === true) throw new NonRetryableError('no');
        if (payload.failOnce === true && !ranOnce.has(task.taskId)) {
          ranOnce.add(task.taskId);
          throw new NonRetryableError('first run');
        }
        return { done: payload.n };
      },
      idleBackoffMs: 50,
    });
    void w.run();
    workers.push(w);
  }
}, 60_000);

afterAll(async () => {
  await Promise.all(workers.map((w) => w.close(1_000)));
  raw.close();
  await admin.close();
});

/** Every key of task `taskId` in etcd (record, payload, history entries). */
async function keysOf(taskId: string): Promise<string[]> {
  const under = async (prefix: string) =>
    (await raw.getAll().prefix(`${PREFIX}${prefix}`).keys()).map((k) => k.slice(PREFIX.length));
  return [
    ...(await under(`tasks/${taskId}`)).filter((k) => k === `tasks/${taskId}`),
    ...(await under(`inputs/${taskId}`)).filter((k) => k === `inputs/${taskId}`),
    ...(await under(`history/${taskId}#`)),
  ];
}

const removedTotal = async (): Promise<number> => {
  let n = 0;
  for (const c of [c1, c2]) {
    const metric = await c.metrics.registry.getSingleMetric('leasehold_coordinator_retention_removed_total')?.get();
    n += (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
  }
  return n;
};

describe('retention with two coordinators', () => {
  it('completed tasks leave etcd by age; their results stay at the sink', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `done/${i}`);
    for (const [i, id] of ids.entries()) await admin.submit({ taskId: id, resource: `ret/d${i}`, payload: { n: i } });
    // Each task seen completed at least once: the first may be removed (1.5 s after it ended)
    // before the last completes on a loaded machine, so a removed one counts when it was seen.
    const seen = new Set<string>();
    let sawKeys: string[] | undefined;
    await waitFor('all completed', async () => {
      for (const id of ids) {
        if (seen.has(id)) continue;
        if ((await admin.get(id))?.state !== 'completed') continue;
        seen.add(id);
        if (id === 'done/3') sawKeys = (await keysOf(id)).sort();
      }
      return seen.size === ids.length ? true : undefined;
    });
    // The keys of an ended task, read while it was kept (empty if it was removed between the reads).
    if (sawKeys !== undefined && sawKeys.length > 0) {
      expect(sawKeys).toEqual(['history/done/3#000000000001', 'inputs/done/3', 'tasks/done/3']);
    }
    await waitFor(
      'removed by age',
      async () => ((await Promise.all(ids.map(keysOf))).flat().length === 0 ? true : undefined),
      20_000,
    );
    expect(await removedTotal()).toBeGreaterThanOrEqual(ids.length);
    for (const [i, id] of ids.entries()) {
      expect(await admin.get(id)).toBeUndefined();
      expect(await stack.sinkClient.getResult(`ret/d${i}`, `task:${id}`)).toMatchObject({ payload: { done: i } });
    }
    const writes = (await allDecisions(stack.sinkClient)).filter((d) => d.kind === 'write' && d.outcome === 'written');
    expect(writes.filter((d) => d.resource.startsWith('ret/d'))).toHaveLength(10);
  }, 60_000);

  it('failed tasks leave by count, the newest stay; a task with its own rule stays', async () => {
    await admin.submit({
      taskId: 'own',
      resource: 'ret/own',
      payload: { n: 0, fail: true },
      retention: { failed: null },
    });
    for (let i = 0; i < 6; i += 1) {
      await admin.submit({ taskId: `failed/${i}`, resource: `ret/f${i}`, payload: { n: i, fail: true } });
      await waitFor(`failed/${i} failed`, async () =>
        (await admin.get(`failed/${i}`))?.state === 'failed' ? true : undefined,
      );
    }
    await waitFor(
      'the oldest removed',
      async () => ((await keysOf('failed/2')).length === 0 ? true : undefined),
      20_000,
    );
    for (const i of [3, 4, 5]) expect(await admin.get(`failed/${i}`)).toMatchObject({ state: 'failed' });
    for (const i of [0, 1, 2]) expect(await admin.get(`failed/${i}`)).toBeUndefined();
    expect(await admin.get('own')).toMatchObject({ state: 'failed', retention: { failed: null } });
  }, 60_000);

  it('retries racing the sweeps never lose a task', async () => {
    // Each task fails its first run (and is over the failed count limit at once: a sweep removes
    // it), and is retried the moment it has failed. A retry either lands — then the task must run
    // again and write its result — or finds the task removed already (404). A sweep planned from an
    // index that still saw the failed record must never remove the retried one.
    const ids = Array.from({ length: 12 }, (_, i) => `race/${i}`);
    for (const [i, id] of ids.entries()) {
      await admin.submit({ taskId: id, resource: `ret/r${i}`, payload: { n: i, failOnce: true } });
    }
    const retried: string[] = [];
    for (const id of ids) {
      await waitFor(`${id} failed or gone`, async () => {
        const v = await admin.get(id);
        return v === undefined || v.state === 'failed' ? true : undefined;
      });
      try {
        await admin.retry(id);
        retried.push(id);
      } catch (err) {
        expect(err).toMatchObject({ code: 'NOT_FOUND' });
      }
    }
    expect(retried.length).toBeGreaterThan(0);
    for (const id of retried) {
      const i = Number(id.slice('race/'.length));
      const result = await waitFor(`${id} ran again and wrote its result`, () =>
        stack.sinkClient.getResult(`ret/r${i}`, `task:${id}`).catch(() => undefined),
      );
      expect(result).toMatchObject({ payload: { done: i } });
    }
  }, 60_000);
});
