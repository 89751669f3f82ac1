/**
 * The worker SDK (`startWorker`, in process) against real etcd, a real sink and a real coordinator:
 * results are written under the grant's token and completed; a failing handler's failure is reported
 * and the task is retried after its backoff; a cancelled task aborts the handler's signal; stop() releases in-flight
 * work; an explicit ctx.write with a custom result id is what the task records.
 */
import { startWorker, type TaskHandler, type Worker } from '@leasehold/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { Stack, type AdminClient } from '../harness/coordinator.js';
import { waitFor } from '../harness/service.js';

let etcd: EtcdHandle;
let stack: Stack;
let admin: AdminClient;
let url: string;
const workers: Worker[] = [];

beforeAll(async () => {
  etcd = await startEtcd();
  stack = await Stack.start({ etcd, prefix: 'test/worker-sdk/', sessionTtlMs: 1_500 });
  const coordinator = await stack.coordinator();
  url = coordinator.url;
  admin = stack.admin(url);
});

afterAll(async () => {
  await Promise.all(workers.map((w) => w.close(1_000)));
  await stack.close();
  await etcd.stop();
});

function worker(handler: TaskHandler, id: string): Worker {
  const w = startWorker({
    coordinators: [url],
    sink: { url: stack.sinkUrl },
    credentials: { workerKey: stack.keys.workerKey },
    workerId: id,
    handler,
    idleBackoffMs: 50,
  });
  workers.push(w);
  return w;
}

async function stateOf(
  taskId: string,
): Promise<{ state: string; attempts: number; result?: { resultId: string; token: string } }> {
  return (await admin.task(taskId)).body as {
    state: string;
    attempts: number;
    result?: { resultId: string; token: string };
  };
}

describe('worker SDK against real services', () => {
  it("writes the handler's result under the grant's token and completes the task", async () => {
    const w = worker(async (task) => ({ doubled: (task.payload as { n: number }).n * 2 }), 'sdk-1');
    await admin.submit('sdk-t1', 'sdk/r1', { n: 21 });
    const done = await waitFor('completion', async () =>
      (await stateOf('sdk-t1')).state === 'completed' ? stateOf('sdk-t1') : undefined,
    );
    expect(done.result?.resultId).toBe('task:sdk-t1');
    const stored = await stack.sinkClient.getResult('sdk/r1', 'task:sdk-t1');
    expect(stored).toMatchObject({ payload: { doubled: 42 }, workerId: 'sdk-1', token: BigInt(done.result!.token) });
    expect(w.stats.completed).toBeGreaterThanOrEqual(1);
    await w.close(1_000);
  });

  it('reports a handler failure, and the retry after the backoff (attempt 2, larger token) completes', async () => {
    const seen: { attempt: number; token: bigint }[] = [];
    const w = worker(async (task, ctx) => {
      seen.push({ attempt: task.attempt, token: ctx.token });
      if (task.attempt === 1) throw new Error('transient failure');
      return { ok: true };
    }, 'sdk-2');
    await admin.submit('sdk-t2', 'sdk/r2', {});
    await waitFor('completion after a retry', async () => (await stateOf('sdk-t2')).state === 'completed');
    expect(seen.map((s) => s.attempt)).toEqual([1, 2]);
    expect(seen[1]!.token).toBeGreaterThan(seen[0]!.token);
    expect(w.stats.failed).toBe(1);
    expect((await stateOf('sdk-t2')) as unknown).toMatchObject({
      history: [
        { outcome: 'failed', error: { name: 'Error', message: 'transient failure' } },
        { outcome: 'completed' },
      ],
    });
    await w.close(1_000);
  });

  it("aborts the handler's signal when its task is cancelled, and never writes", async () => {
    let aborted: unknown;
    let markStarted!: () => void;
    const started = new Promise<void>((resolve) => {
      markStarted = resolve;
    });
    const w = worker(
      (_task, ctx) =>
        new Promise((_resolve, reject) => {
          markStarted();
          ctx.signal.addEventListener('abort', () => {
            aborted = ctx.signal.reason;
            reject(ctx.signal.reason as Error);
          });
        }),
      'sdk-3',
    );
    await admin.submit('sdk-t3', 'sdk/r3', {});
    await started;
    expect((await admin.cancel('sdk-t3')).status).toBe(200);
    await waitFor('the abort', () => aborted !== undefined);
    expect(String(aborted)).toMatch(/revoked/);
    expect(await stack.sinkClient.getResult('sdk/r3', 'task:sdk-t3')).toBeUndefined();
    expect(w.stats.lost).toBe(1);
    await w.close(1_000);
  });

  it('stop() aborts a handler that outlives the grace period and releases its lease', async () => {
    const w = worker(
      (_task, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reject(ctx.signal.reason as Error);
          });
        }),
      'sdk-4',
    );
    await admin.submit('sdk-t4', 'sdk/r4', {});
    await waitFor('the lease', async () => (await stateOf('sdk-t4')).state === 'leased');
    await w.close(200);
    expect(w.stats.released).toBe(1);
    await waitFor('the task back to pending', async () => (await stateOf('sdk-t4')).state === 'pending');
  });

  it('records an explicit ctx.write result id on the task', async () => {
    const w = worker(async (task, ctx) => {
      await ctx.write({ custom: true }, { resultId: `order-${task.taskId}` });
      return undefined;
    }, 'sdk-5');
    await admin.submit('sdk-t5', 'sdk/r5', {});
    await waitFor('completion', async () => (await stateOf('sdk-t5')).state === 'completed');
    expect((await stateOf('sdk-t5')).result?.resultId).toBe('order-sdk-t5');
    expect(await stack.sinkClient.getResult('sdk/r5', 'order-sdk-t5')).toMatchObject({ payload: { custom: true } });
    await w.close(1_000);
  });
});
