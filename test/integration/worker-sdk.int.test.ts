/**
 * The worker SDK (in process) against real etcd, a real sink and a real coordinator: results are
 * written under the grant's token and completed; a failing handler's failure is reported and the
 * task is retried after its backoff; a cancelled task aborts the handler's signal; close() releases
 * in-flight work; an explicit ctx.write with a custom result id is what the task records; a
 * side-effect-only handler completes its task with no result; a payload the worker's schema
 * refuses fails the task at once, the handler never runs.
 */
import type { PayloadSchema, TaskHandler, Worker, WorkerOptions } from '@leasehold/worker';
import type { JsonValue } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { useSdkStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const fx = useSdkStack({ prefix: 'test/worker-sdk/', workerIdPrefix: 'sdk', sessionTtlMs: 1_500 });

/** A Standard Schema written by hand (zod, valibot and arktype implement the same interface). */
const amountsSchema: PayloadSchema<{ amounts: number[] }> = {
  '~standard': {
    version: 1,
    vendor: 'test',
    validate: (value) => {
      const amounts = (value as { amounts?: unknown } | null)?.amounts;
      if (!Array.isArray(amounts)) return { issues: [{ message: 'an array', path: ['amounts'] }] };
      const bad = amounts.findIndex((a) => typeof a !== 'number');
      return bad < 0
        ? { value: { amounts: amounts as number[] } }
        : { issues: [{ message: 'a number', path: ['amounts', bad] }] };
    },
  },
};

function worker<P = JsonValue, R = JsonValue>(
  handler: TaskHandler<P, R>,
  id: string,
  options: Partial<WorkerOptions<P, R>> = {},
): Worker<P, R> {
  return fx.worker(handler, { workerId: id, options });
}

async function stateOf(
  taskId: string,
): Promise<{ state: string; attempts: number; result?: { resultId: string; token: string } }> {
  return (await fx.admin.task(taskId)).body as {
    state: string;
    attempts: number;
    result?: { resultId: string; token: string };
  };
}

describe('worker SDK against real services', () => {
  it("writes the handler's result under the grant's token and completes the task", async () => {
    const w = worker(async (task) => ({ doubled: (task.payload as { n: number }).n * 2 }), 'sdk-1');
    await fx.admin.submit('sdk-t1', 'sdk/r1', { n: 21 });
    const done = await waitFor('completion', async () =>
      (await stateOf('sdk-t1')).state === 'completed' ? stateOf('sdk-t1') : undefined,
    );
    expect(done.result?.resultId).toBe('task:sdk-t1');
    const stored = await fx.stack.sinkClient.getResult('sdk/r1', 'task:sdk-t1');
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
    await fx.admin.submit('sdk-t2', 'sdk/r2', {});
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
    await fx.admin.submit('sdk-t3', 'sdk/r3', {});
    await started;
    expect((await fx.admin.cancel('sdk-t3')).status).toBe(200);
    await waitFor('the abort', () => aborted !== undefined);
    expect(String(aborted)).toMatch(/revoked/);
    expect(await fx.stack.sinkClient.getResult('sdk/r3', 'task:sdk-t3')).toBeUndefined();
    expect(w.stats.lost).toBe(1);
    await w.close(1_000);
  });

  it('close() aborts a handler that outlives the grace period and releases its lease', async () => {
    const w = worker(
      (_task, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reject(ctx.signal.reason as Error);
          });
        }),
      'sdk-4',
    );
    await fx.admin.submit('sdk-t4', 'sdk/r4', {});
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
    await fx.admin.submit('sdk-t5', 'sdk/r5', {});
    await waitFor('completion', async () => (await stateOf('sdk-t5')).state === 'completed');
    expect((await stateOf('sdk-t5')).result?.resultId).toBe('order-sdk-t5');
    expect(await fx.stack.sinkClient.getResult('sdk/r5', 'order-sdk-t5')).toMatchObject({ payload: { custom: true } });
    await w.close(1_000);
  });

  it('a side-effect-only handler (it returns nothing) completes its task, with no result at the sink', async () => {
    let effects = 0;
    const w = worker(async () => {
      effects += 1;
    }, 'sdk-6');
    await fx.admin.submit('sdk-t6', 'sdk/r6', {});
    await waitFor('completion', async () => (await stateOf('sdk-t6')).state === 'completed');
    expect(effects).toBe(1);
    expect((await stateOf('sdk-t6')).attempts).toBe(1);
    expect(await fx.stack.sinkClient.getResult('sdk/r6', 'task:sdk-t6')).toBeUndefined();
    expect(w.stats).toMatchObject({ completed: 1, failed: 0 });
    await w.close(1_000);
  });

  it("a payload the worker's schema refuses fails the task at once; the handler never runs", async () => {
    let ran = 0;
    const w = worker(
      (task) => {
        ran += 1;
        return { total: task.payload.amounts.reduce((a, b) => a + b, 0) };
      },
      'sdk-7',
      { payload: amountsSchema },
    );
    await fx.admin.submit('sdk-t7', 'sdk/r7', { amounts: [1, 'two'] });
    await waitFor('the task to fail', async () => (await stateOf('sdk-t7')).state === 'failed');
    expect(ran).toBe(0);
    const failed = (await stateOf('sdk-t7')) as unknown as {
      attempts: number;
      history: { outcome: string; error?: { name: string; message: string } }[];
    };
    expect(failed.attempts).toBe(1);
    expect(failed.history.map((h) => [h.outcome, h.error?.name])).toEqual([['failed', 'InvalidPayloadError']]);
    expect(failed.history[0]?.error?.message).toMatch(/amounts\.1: a number/);
    await w.close(1_000);
  });
});
