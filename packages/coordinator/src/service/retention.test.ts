/**
 * Retention on the real services (two coordinators, the in-memory etcd, manual clocks): ended
 * tasks go by age and by count — record, payload and history — one coordinator sweeping at a
 * time, and a retry racing a sweep planned from a stale index never loses the task.
 *
 * Mechanisms: RetentionService (service/retention.ts), planRetention (core/retention.ts), the
 * `purgeTasks` compare (mod_revision as the index saw it) and the retention lock.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;
let c2: TestCoordinator;

const RETENTION = {
  RETENTION: 'true',
  RETENTION_COMPLETED_MS: '60000',
  RETENTION_COMPLETED_COUNT: 'off',
  RETENTION_FAILED_MS: 'off',
  RETENTION_FAILED_COUNT: '2',
  RETENTION_CANCELLED_MS: '0',
  RETENTION_CANCELLED_COUNT: 'off',
  RETENTION_MIN_AGE_MS: '0',
  RETENTION_INTERVAL_MS: '1000',
  SESSION_TTL_MS: '600000',
  HEARTBEAT_INTERVAL_MS: '1000',
};

async function setup(env: Record<string, string> = RETENTION): Promise<void> {
  cluster = new ServiceCluster(env);
  c1 = await cluster.coordinator('c1');
  c2 = await cluster.coordinator('c2');
}

afterEach(async () => {
  await cluster.close();
});

/** Every key of task `taskId` (record, payload, history) left in etcd. */
function keysOf(taskId: string): string[] {
  const k = cluster.keys;
  return cluster.etcd
    .keys(k.prefix)
    .map((kv) => kv.key)
    .filter((key) => key === k.task(taskId) || key === k.input(taskId) || key.startsWith(k.historyOf(taskId)));
}

async function completeTask(c: TestCoordinator, taskId: string): Promise<void> {
  await cluster.submit(c, taskId, `r-${taskId}`);
  const w = await cluster.worker(c, `w-${taskId}`);
  const g = await cluster.acquire(w, { taskId });
  expect(await cluster.complete(w, taskId, `r-${taskId}`, tokenOf(g))).toMatchObject({ type: 'task.completed' });
  await cluster.settle();
}

async function failTask(c: TestCoordinator, taskId: string): Promise<void> {
  await cluster.submit(c, taskId, `r-${taskId}`);
  const w = await cluster.worker(c, `w-${taskId}`);
  const g = await cluster.acquire(w, { taskId });
  await cluster.fail(w, taskId, `r-${taskId}`, tokenOf(g), { name: 'Fatal', message: 'x', retryable: false });
  await cluster.settle();
}

/** The sum of a counter's samples (those with `labels`) on coordinator `c`. */
const counter = async (c: TestCoordinator, name: string, labels: Record<string, string> = {}) => {
  const metric = await c.services.metrics.registry.getSingleMetric(name)?.get();
  return (metric?.values ?? [])
    .filter((v) => Object.entries(labels).every(([k, want]) => v.labels[k] === want))
    .reduce((n, v) => n + v.value, 0);
};
const removed = (c: TestCoordinator) => counter(c, 'leasehold_coordinator_retention_removed_total');
const sweeps = (c: TestCoordinator, outcome: string) =>
  counter(c, 'leasehold_coordinator_retention_sweeps_total', { outcome });

describe('retention of ended tasks', () => {
  it('removes completed tasks by age (record, payload and history), cancelled ones at once', async () => {
    await setup();
    await completeTask(c1, 'done');
    expect(keysOf('done')).toHaveLength(3); // record, payload, one history entry
    await cluster.submit(c1, 'gone', 'r-gone');
    expect((await c1.services.tasks.cancel('gone')).ok).toBe(true);
    await cluster.advance(1_000);
    expect(keysOf('gone')).toEqual([]);
    expect(keysOf('done')).toHaveLength(3);
    await cluster.advance(60_000);
    expect(keysOf('done')).toEqual([]);
    expect(await c1.services.tasks.get('done')).toBeUndefined();
    expect(c1.services.index.stats().ended).toEqual({ completed: 0, failed: 0, cancelled: 0 });
  });

  it('the coordinator that swept forgets what it removed at once, before its watch says so', async () => {
    await setup({ ...RETENTION, RETENTION_INTERVAL_MS: '3600000' });
    await cluster.submit(c1, 'gone', 'r-gone');
    expect((await c1.services.tasks.cancel('gone')).ok).toBe(true);
    await cluster.settle();
    c1.backend.pauseWatch();
    await c1.services.retention.sweep();
    expect(keysOf('gone')).toEqual([]);
    expect(c1.services.index.endedTask('gone')).toBeUndefined();
    expect(c1.services.retention.plan()).toEqual([]);
    c1.backend.resumeWatch();
    await cluster.settle();
  });

  it('keeps the newest N failed tasks; one coordinator sweeps at a time', async () => {
    // Sweeps by hand: both coordinators sweep at the same moment.
    await setup({ ...RETENTION, RETENTION_INTERVAL_MS: '3600000' });
    for (const id of ['f1', 'f2', 'f3', 'f4']) {
      await failTask(c1, id);
      await cluster.advance(10);
    }
    await Promise.all([c1.services.retention.sweep(), c2.services.retention.sweep()]);
    await cluster.settle();
    const left = ['f1', 'f2', 'f3', 'f4'].filter((id) => keysOf(id).length > 0);
    expect(left).toEqual(['f3', 'f4']);
    // Both planned the same removals at the same tick; the lock let one of them sweep.
    expect((await removed(c1)) + (await removed(c2))).toBe(2);
    expect((await sweeps(c1, 'done')) + (await sweeps(c2, 'done'))).toBe(1);
    expect((await sweeps(c1, 'locked')) + (await sweeps(c2, 'locked'))).toBe(1);
  });

  it('a task submitted with its own rule stays past the installation rule', async () => {
    await setup();
    await cluster.submit(c1, 'keep', 'r-keep', { n: 1 }, { retention: { cancelled: null } });
    await c1.services.tasks.cancel('keep');
    await cluster.advance(5_000);
    expect(keysOf('keep')).toHaveLength(2);
  });

  it('a retry racing a sweep planned from a stale index never loses the task', async () => {
    await setup({ ...RETENTION, RETENTION_FAILED_COUNT: '0' });
    await failTask(c1, 'raced');
    // c2's index stops here (its watch is held back): it still sees `raced` failed.
    c2.backend.pauseWatch();
    c1.backend.pauseWatch();
    expect((await c1.services.tasks.retry('raced')).ok).toBe(true);
    expect(c2.services.index.endedTask('raced')?.state).toBe('failed');
    // The stale sweep tries to remove the failed record it saw: the compare refuses.
    await c2.services.retention.sweep();
    await c1.services.retention.sweep();
    expect(keysOf('raced')).toHaveLength(3);
    c1.backend.resumeWatch();
    c2.backend.resumeWatch();
    await cluster.advance(2_000);
    expect((await c1.services.tasks.get('raced'))?.state).toBe('pending');
  });
});
