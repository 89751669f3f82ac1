/**
 * Named queues (issue 25) on real processes: a real etcd, the built coordinator and sink, and three
 * built `leasehold-worker` processes on one coordinator — one serving `alpha`, one `beta`, one
 * naming no queue (so `default`). Tasks submitted to `alpha` and `beta` (single and batch submits),
 * plus old-style submits with no queue at all, each end up completed by the worker of their own
 * queue only, and the old-style ones are `default`'s. The admin list filters by `?queue=` and the
 * task gauge counts per queue.
 */
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import type { TaskView } from '@leasehold/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Stack, type AdminClient } from '../harness/coordinator.js';
import { BIN, Service, waitFor } from '../harness/service.js';

let etcd: EtcdHandle;
let stack: Stack;
let admin: AdminClient;
let coordinatorUrl: string;
const services: Service[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
  stack = await Stack.start({ etcd, prefix: 'test/queues/', sessionTtlMs: 3_000 });
  coordinatorUrl = (await stack.coordinator()).url;
  admin = stack.admin(coordinatorUrl);
});

afterAll(async () => {
  for (const s of services) {
    await s.kill();
    s.close();
  }
  await stack.close();
  await etcd.stop();
});

function worker(workerId: string, queues: string | undefined): Service {
  const s = new Service({
    name: workerId,
    bin: BIN.worker,
    dir: stack.dir,
    listens: false,
    env: {
      LEASEHOLD_WORKER_COORDINATORS: coordinatorUrl,
      LEASEHOLD_WORKER_SINK_URL: stack.sinkUrl,
      LEASEHOLD_WORKER_WORKER_KEY: stack.keys.workerKey,
      LEASEHOLD_WORKER_WORKER_ID: workerId,
      LEASEHOLD_WORKER_CONCURRENCY: '2',
      LEASEHOLD_WORKER_DEMO_DURATION_MS: '10',
      LEASEHOLD_WORKER_LOG_LEVEL: 'warn',
      LEASEHOLD_WORKER_PRETTY: 'false',
      ...(queues === undefined ? {} : { LEASEHOLD_WORKER_QUEUES: queues }),
    },
  });
  services.push(s);
  return s;
}

async function view(taskId: string): Promise<TaskView> {
  const res = await admin.task(taskId);
  expect(res.status).toBe(200);
  return res.body as TaskView;
}

describe('named queues', () => {
  it('two workers serving different queues each get only their own tasks; a submit with no queue is default', async () => {
    const alpha = Array.from({ length: 6 }, (_, i) => `alpha-${i}`);
    const beta = Array.from({ length: 6 }, (_, i) => `beta-${i}`);
    const plain = Array.from({ length: 3 }, (_, i) => `plain-${i}`);
    // Submitted before any worker runs: every worker could take any of them if queues were ignored.
    for (const taskId of alpha.slice(0, 3)) {
      expect(
        (await admin.call('POST', '/v1/tasks', { taskId, resource: `r/${taskId}`, queue: 'alpha', payload: {} }))
          .status,
      ).toBe(201);
    }
    const batch = await admin.call('POST', '/v1/tasks/batch', {
      tasks: [
        ...alpha.slice(3).map((taskId) => ({ taskId, resource: `r/${taskId}`, queue: 'alpha', payload: {} })),
        ...beta.map((taskId) => ({ taskId, resource: `r/${taskId}`, queue: 'beta', payload: {} })),
      ],
    });
    expect(batch.status).toBe(200);
    expect((batch.body as { results: { status: number }[] }).results.map((r) => r.status)).toEqual(
      Array.from({ length: 9 }, () => 201),
    );
    // Old-style: no queue field at all (what a client before queues sends).
    for (const taskId of plain) expect((await admin.submit(taskId, `r/${taskId}`)).status).toBe(201);
    expect((await view('plain-0')).queue).toBe('default');
    expect((await view('beta-0')).queue).toBe('beta');

    // A bad queue name is refused and changes nothing.
    const bad = await admin.call('POST', '/v1/tasks', { taskId: 'bad', resource: 'r/bad', queue: '../x', payload: {} });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'INVALID_MESSAGE' });
    expect((await admin.task('bad')).status).toBe(404);

    const workers = [worker('alpha-worker', 'alpha'), worker('beta-worker', 'beta'), worker('plain-worker', undefined)];
    await Promise.all(workers.map((w) => w.start()));

    const all = [...alpha, ...beta, ...plain];
    const done = await waitFor(
      'every task completed',
      async () => {
        const views = await Promise.all(all.map(view));
        return views.every((v) => v.state === 'completed') ? views : undefined;
      },
      60_000,
      200,
    );
    const byWorker = (ids: readonly string[]) =>
      new Set(done.filter((v) => ids.includes(v.taskId)).map((v) => v.lastAttempt?.workerId));
    expect(byWorker(alpha)).toEqual(new Set(['alpha-worker']));
    expect(byWorker(beta)).toEqual(new Set(['beta-worker']));
    expect(byWorker(plain)).toEqual(new Set(['plain-worker']));

    // The admin list filter and the per-queue gauge.
    const listed = await admin.list('?queue=beta&limit=100');
    expect(listed.body.tasks.map((t) => t.taskId).sort()).toEqual([...beta].sort());
    expect((await admin.list('?queue=default&limit=100')).body.tasks.map((t) => t.taskId).sort()).toEqual(plain);
    expect((await admin.list('?queue=..')).status).toBe(400);
    const metrics = await (await fetch(`${coordinatorUrl}/metrics`)).text();
    expect(metrics).toMatch(/^leasehold_coordinator_tasks\{state="completed",queue="alpha"\} 6$/m);
    expect(metrics).toMatch(/^leasehold_coordinator_tasks\{state="completed",queue="default"\} 3$/m);
  });
});
