/**
 * Task lifecycle on real etcd, a real sink, real coordinators and SDK workers (in process): failing
 * handlers and their backoff, non-retryable errors, a sink outage, cancel of a held task, retry of
 * a failed task, delayed and prioritised tasks, and two coordinators sharing the backoff. Grant
 * times come from the workers' own `granted` events; every wait is on observable state.
 */
import type { Coordinator } from '@leasehold/coordinator';
import type { SubmitTaskRequest, TaskView } from '@leasehold/protocol';
import { NonRetryableError, WriteRefusedError, type TaskHandler, type Worker } from '@leasehold/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sessionServers } from '../harness/coordinator.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { useSdkStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

/** 3 attempts; 400 ms, then 800 ms between them (no jitter: the gaps are asserted). */
const POLICY = {
  LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS: '3',
  LEASEHOLD_COORDINATOR_RETRY_INITIAL_MS: '400',
  LEASEHOLD_COORDINATOR_RETRY_MULTIPLIER: '2',
  LEASEHOLD_COORDINATOR_RETRY_JITTER: '0',
  LEASEHOLD_COORDINATOR_SETTLE_GRACE_MS: '300',
};
/** How late a grant may come after its due time (a long poll wakes at it; loaded CI machines). */
const LATE_MS = 400;

const fx = useSdkStack({ prefix: 'test/task-lifecycle/', workerIdPrefix: 'lc', coordinatorEnv: POLICY });

interface Seen {
  readonly grants: { taskId: string; atMs: number; attempt: number }[];
}

/** An SDK worker on `url`; records when each grant arrived. */
function worker(handler: TaskHandler, options: { url?: string; sinkUrl?: string; seen?: Seen } = {}): Worker {
  const seen = options.seen;
  const recording: TaskHandler = async (task, ctx) => {
    seen?.grants.push({ taskId: task.taskId, atMs: Date.now(), attempt: task.attempt });
    return handler(task, ctx);
  };
  return fx.worker(recording, { url: options.url, sinkUrl: options.sinkUrl });
}

async function submit(task: Omit<SubmitTaskRequest, 'payload'> & { payload?: unknown }): Promise<TaskView> {
  return (await fx.client.submit({ payload: {}, ...task } as SubmitTaskRequest)).task;
}

async function settledAs(taskId: string, state: string, timeoutMs = 20_000): Promise<TaskView> {
  return waitFor(
    `${taskId} ${state}`,
    async () => {
      const view = await fx.client.get(taskId);
      return view?.state === state ? view : undefined;
    },
    timeoutMs,
  );
}

describe('failures and retries', () => {
  it('a throwing handler ends failed after exactly 3 attempts, 400 ms then 800 ms apart', async () => {
    const seen: Seen = { grants: [] };
    worker(
      () => {
        throw new TypeError('handler bug');
      },
      { seen },
    );
    await submit({ taskId: 'throws', resource: 'lc/r1' });
    const failed = await settledAs('throws', 'failed');
    expect(failed).toMatchObject({ attempts: 3, lastError: { name: 'TypeError', message: 'handler bug' } });
    expect((failed.history ?? []).map((h) => h.outcome)).toEqual(['failed', 'failed', 'failed']);
    const times = seen.grants.filter((g) => g.taskId === 'throws').map((g) => g.atMs);
    expect(times).toHaveLength(3);
    const [t1 = 0, t2 = 0, t3 = 0] = times;
    expect(t2 - t1).toBeGreaterThanOrEqual(400 - 20);
    expect(t2 - t1).toBeLessThan(400 + LATE_MS);
    expect(t3 - t2).toBeGreaterThanOrEqual(800 - 20);
    expect(t3 - t2).toBeLessThan(800 + LATE_MS);
  });

  it('a NonRetryableError fails the task at once', async () => {
    const seen: Seen = { grants: [] };
    worker(
      () => {
        throw new NonRetryableError('bad payload');
      },
      { seen },
    );
    await submit({ taskId: 'fatal', resource: 'lc/r2' });
    const failed = await settledAs('fatal', 'failed');
    expect(failed).toMatchObject({ attempts: 1, lastError: { name: 'NonRetryableError' } });
    expect(seen.grants.filter((g) => g.taskId === 'fatal')).toHaveLength(1);
  });

  it('retry of a failed task makes it pending with a fresh budget, and it completes', async () => {
    let fail = true;
    worker(() => {
      if (fail) throw new NonRetryableError('not yet');
      return { ok: true };
    });
    await submit({ taskId: 'again', resource: 'lc/r3' });
    await settledAs('again', 'failed');
    fail = false;
    const retried = await fx.client.request('POST', '/v1/tasks/again/retry');
    expect(retried.status).toBe(200);
    const done = await settledAs('again', 'completed');
    expect((done.history ?? []).map((h) => h.outcome)).toEqual(['failed', 'completed']);
    expect(await fx.stack.sinkClient.getResult('lc/r3', 'task:again')).toMatchObject({ payload: { ok: true } });
    expect((await fx.client.request('POST', '/v1/tasks/again/retry')).status).toBe(409);
  });
});

describe('a sink outage', () => {
  let proxy: FaultProxy;
  let c2: Coordinator;

  beforeAll(async () => {
    const port = Number(new URL(fx.stack.sinkUrl).port);
    proxy = await startFaultProxy({ name: 'coordinator->sink', targetPort: port });
    c2 = await fx.stack.coordinator({
      ...POLICY,
      LEASEHOLD_COORDINATOR_SINK_URL: proxy.url,
      LEASEHOLD_COORDINATOR_SINK_TIMEOUT_MS: '300',
    });
  });
  afterAll(async () => {
    await proxy.close();
  });

  it('a few seconds without the sink cost a bounded number of grant attempts and none of the budget', async () => {
    proxy.setMode({ kind: 'reset' });
    const seen: Seen = { grants: [] };
    worker(() => ({ ok: true }), { url: c2.url, seen });
    await submit({ taskId: 'outage', resource: 'lc/r4' });
    // Abandoned grants back off 400, then 800 ms (the policy's backoff): three of them take over
    // 1.2 s, so a few seconds of outage cost a bounded number, and none of the attempt budget.
    const during = await waitFor('three abandoned grants', async () => {
      const view = await fx.client.get('outage');
      return (view?.history?.length ?? 0) >= 3 ? view : undefined;
    });
    const history = during.history ?? [];
    expect(history.every((h) => h.outcome === 'abandoned')).toBe(true);
    const [a1 = 0, a2 = 0, a3 = 0] = history.map((h) => h.startedAtMs);
    expect(a2 - a1).toBeGreaterThanOrEqual(400 - 20);
    expect(a3 - a2).toBeGreaterThanOrEqual(800 - 20);
    expect(during.attempts).toBe(0);
    expect(seen.grants).toHaveLength(0);
    proxy.setMode({ kind: 'pass' });
    const done = await settledAs('outage', 'completed');
    expect(done.history?.at(-1)).toMatchObject({ outcome: 'completed', attempt: 1 });
  });
});

describe('cancel', () => {
  it("cancelling a held task refuses the holder's late write", async () => {
    let release: (() => void) | undefined;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    let writeError: unknown;
    let started = false;
    worker(async (_task, ctx) => {
      started = true;
      await blocked;
      try {
        await ctx.write({ late: true });
      } catch (err) {
        writeError = err;
      }
      return undefined;
    });
    await submit({ taskId: 'cancel-me', resource: 'lc/r5' });
    await waitFor('the handler to start', () => started);
    const cancelled = await fx.client.cancel('cancel-me');
    expect(cancelled.state).toBe('cancelled');
    release?.();
    await waitFor('the late write to be refused', () => writeError !== undefined);
    // The SDK's signal fired (lease.revoked) or the sink refused the token: either way nothing landed.
    expect(writeError instanceof WriteRefusedError || (writeError as Error).name === 'LeaseLostError').toBe(true);
    expect((await fx.stack.sinkClient.getResource('lc/r5')).results).toEqual([]);
  });

  it("the sink refuses a cancelled holder's write even when the worker never heard of the cancel", async () => {
    // A raw worker (no SDK signal): it keeps its grant and writes after the cancel.
    const w = await fx.stack.worker(fx.coordinator.url, 'raw-holder');
    await submit({ taskId: 'cancel-raw', resource: 'lc/r6' });
    const grant = await waitFor('a grant', async () => {
      const reply = await w.acquire(`q-${Date.now()}`, 'cancel-raw');
      return reply.type === 'lease.granted' ? reply : undefined;
    });
    await fx.client.cancel('cancel-raw');
    const res = await fx.stack.sinkClient.write({
      resource: 'lc/r6',
      token: BigInt(grant.token),
      resultId: 'task:cancel-raw',
      workerId: 'raw-holder',
      incarnation: 'inc-1',
      capability: grant.capability,
      payload: { late: true },
    });
    expect(res).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
    w.socket.close();
  });
});

describe('delays and priorities', () => {
  it('a delayed task is not granted before its time', async () => {
    const seen: Seen = { grants: [] };
    worker(() => ({ ok: true }), { seen });
    const submittedAt = Date.now();
    const view = await submit({ taskId: 'later', resource: 'lc/r7', delayMs: 1_500 });
    expect(view.state).toBe('delayed');
    const done = await settledAs('later', 'completed');
    const grant = seen.grants.find((g) => g.taskId === 'later');
    expect(grant?.atMs).toBeGreaterThanOrEqual((view.notBeforeMs ?? submittedAt + 1_500) - 20);
    expect(grant?.atMs).toBeLessThan((view.notBeforeMs ?? 0) + LATE_MS + 500);
    expect(done.attempts).toBe(1);
  });

  it('higher priorities are granted first', async () => {
    // Exact order within a priority holds while one coordinator serves sessions (docs/protocol.md ›
    // several coordinators): with two, each prefers the resources assigned to it. The sink outage
    // test's worker on c2 has closed, but its session lives until its deadline (the TTL).
    await waitFor('no session served by another coordinator', async () => {
      const servers = await sessionServers(fx.stack.etcd.endpoints, fx.stack.opts.prefix);
      return [...servers].every((id) => id === fx.coordinator.coordinatorId);
    });
    // Submitted while no worker runs; then one worker with one slot takes them in order.
    const order = ['p0-a', 'p5', 'p0-b', 'p9'];
    const priority: Record<string, number> = { 'p0-a': 0, p5: 5, 'p0-b': 0, p9: 9 };
    for (const id of order) await submit({ taskId: id, resource: `lc/prio/${id}`, priority: priority[id] });
    const seen: Seen = { grants: [] };
    worker(() => ({ ok: true }), { seen });
    await waitFor('all four', () => seen.grants.filter((g) => g.taskId in priority).length === 4);
    expect(seen.grants.filter((g) => g.taskId in priority).map((g) => g.taskId)).toEqual(['p9', 'p5', 'p0-a', 'p0-b']);
  });

  it('two coordinators: the backoff one wrote is honoured by the other', async () => {
    const c3 = await fx.stack.coordinator(POLICY);
    // One failure reported on c1 (a raw worker: exactly one attempt), then a worker on c3 only.
    const raw = await fx.stack.worker(fx.coordinator.url, 'raw-failer');
    await submit({ taskId: 'cross', resource: 'lc/r8' });
    const grant = await waitFor('a grant on c1', async () => {
      const reply = await raw.acquire(`q-${Date.now()}`, 'cross');
      return reply.type === 'lease.granted' ? reply : undefined;
    });
    const failed = await raw.request({
      type: 'task.fail',
      taskId: 'cross',
      resource: 'lc/r8',
      token: grant.token,
      incarnation: 'inc-1',
      error: { name: 'Error', message: 'first attempt fails', retryable: true },
    });
    expect(failed).toMatchObject({ type: 'task.failed', outcome: 'retrying' });
    raw.socket.close();
    const retrying = await waitFor('the first failure', async () => {
      const v = await fx.client.get('cross');
      return v?.history?.length === 1 ? v : undefined;
    });
    const failedAt = retrying.history?.[0]?.endedAtMs ?? 0;
    const seen: Seen = { grants: [] };
    worker(() => ({ ok: true }), { url: c3.url, seen });
    await settledAs('cross', 'completed');
    const retry = seen.grants.find((g) => g.taskId === 'cross');
    expect(retry?.attempt).toBe(2);
    expect(retry?.atMs).toBeGreaterThanOrEqual(failedAt + 400 - 20);
  });
});
