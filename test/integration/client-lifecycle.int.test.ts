/**
 * @leasehold/client against real etcd, a real sink and real coordinators (in process), with SDK
 * workers: submits with scheduling options, submitMany, list by state, cancel, retry, purge,
 * the task event stream (resumed across a coordinator going away, nothing lost or repeated),
 * waitForResult in every outcome (and its race with an already-ended task, and its deadline),
 * the sink's event stream through the client, and request failover between coordinator URLs.
 */
import {
  InvalidResultError,
  LeaseholdClient,
  WaitTimeoutError,
  type CoordinatorEvent,
  type SinkEvent,
  type StandardSchema,
} from '@leasehold/client';
import { NonRetryableError, type TaskHandler } from '@leasehold/worker';
import { describe, expect, it } from 'vitest';
import { useSdkStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const POLICY = {
  LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS: '3',
  LEASEHOLD_COORDINATOR_RETRY_INITIAL_MS: '100',
  LEASEHOLD_COORDINATOR_RETRY_JITTER: '0',
};

const fx = useSdkStack({
  prefix: 'test/client-lifecycle/',
  workerIdPrefix: 'cl',
  coordinatorEnv: POLICY,
  sinkReads: true,
});

/** A Standard Schema (no library: any one will do) of `{ [key]: number }`. */
function numberAt<K extends string>(key: K): StandardSchema<Record<K, number>> {
  return {
    '~standard': {
      version: 1,
      vendor: 'test',
      validate: (value) => {
        const n = (value as Partial<Record<K, unknown>> | null)?.[key];
        return typeof n === 'number'
          ? { value: { [key]: n } as Record<K, number> }
          : { issues: [{ message: 'not a number', path: [key] }] };
      },
    },
  };
}

const worker = (handler: TaskHandler, url?: string) => fx.worker(handler, { url });

describe('submit, list, cancel, retry, purge', () => {
  it('submits with priority, a delay, a run-at time and a retry policy; the view shows them; list filters by state', async () => {
    const delayed = await fx.client.submit({
      taskId: 'opts-delay',
      resource: 'cl/opts/1',
      payload: { n: 1 },
      priority: 7,
      delayMs: 600_000,
      retry: { maxAttempts: 2, backoff: { initialMs: 250, maxMs: 1_000 }, nonRetryable: ['Fatal'] },
    });
    expect(delayed.created).toBe(true);
    expect(delayed.task).toMatchObject({
      state: 'delayed',
      priority: 7,
      retry: { maxAttempts: 2, backoff: { initialMs: 250, maxMs: 1_000 }, nonRetryable: ['Fatal'] },
      lastEvent: 'submitted',
    });
    const runAt = new Date(Date.now() + 3_600_000);
    const scheduled = await fx.client.submit({ taskId: 'opts-runat', resource: 'cl/opts/2', payload: {}, runAt });
    expect(scheduled.task.notBeforeMs).toBe(runAt.getTime());
    // Same definition again: idempotent, the first submit's options stay.
    const again = await fx.client.submit({
      taskId: 'opts-delay',
      resource: 'cl/opts/1',
      payload: { n: 1 },
      priority: 1,
    });
    expect(again).toMatchObject({ created: false, task: { priority: 7 } });
    await expect(
      fx.client.submit({ taskId: 'opts-delay', resource: 'cl/opts/1', payload: { n: 2 } }),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    const ids = (await fx.client.tasks('delayed')).map((t) => t.taskId);
    expect(ids).toEqual(expect.arrayContaining(['opts-delay', 'opts-runat']));
    expect((await fx.client.tasks('pending')).map((t) => t.taskId)).not.toContain('opts-delay');
    expect((await fx.client.cancel('opts-delay')).state).toBe('cancelled');
    expect((await fx.client.cancel('opts-runat')).state).toBe('cancelled');
  });

  it('submitMany answers each task: created, existing, conflict', async () => {
    await fx.client.submit({ taskId: 'many-0', resource: 'cl/many', payload: 0, delayMs: 600_000 });
    const results = await fx.client.submitMany([
      { taskId: 'many-0', resource: 'cl/many', payload: 0 },
      { taskId: 'many-1', resource: 'cl/many', payload: 1, delayMs: 600_000, priority: 3 },
      { taskId: 'many-0', resource: 'cl/many', payload: 'other' },
    ]);
    expect(results.map((r) => r.status)).toEqual([200, 201, 409]);
    expect(results[1]?.task).toMatchObject({ state: 'delayed', priority: 3 });
    expect(results[2]?.error).toMatchObject({ code: 'CONFLICT' });
    // Without views (Prefer: return=minimal): the same outcomes, no task views.
    const lean = await fx.client.submitMany(
      [
        { taskId: 'many-1', resource: 'cl/many', payload: 1, delayMs: 600_000, priority: 3 },
        { taskId: 'many-2', resource: 'cl/many', payload: 2, delayMs: 600_000 },
        { taskId: 'many-0', resource: 'cl/many', payload: 'other' },
      ],
      { views: false },
    );
    expect(lean.map((r) => r.status)).toEqual([200, 201, 409]);
    expect(lean.filter((r) => r.task !== undefined)).toEqual([]);
    expect(lean[2]?.error).toMatchObject({ code: 'CONFLICT' });
    await fx.client.cancel('many-0');
    await fx.client.cancel('many-1');
    await fx.client.cancel('many-2');
  });

  it('retry: a failed task runs again with a fresh budget; CONFLICT when not failed; NOT_FOUND when unknown', async () => {
    let fail = true;
    worker(() => {
      if (fail) throw new NonRetryableError('not yet');
      return { ok: true };
    });
    await fx.client.submit({ taskId: 'cl-again', resource: 'cl/again', payload: {} });
    const failed = await fx.client.waitForResult('cl-again', { timeoutMs: 20_000 });
    expect(failed.state).toBe('failed');
    fail = false;
    const retried = await fx.client.retry('cl-again');
    expect(['pending', 'leased']).toContain(retried.state);
    expect(retried.attempts).toBe(0);
    const done = await fx.client.waitForResult('cl-again', { timeoutMs: 20_000 });
    expect(done.state).toBe('completed');
    await expect(fx.client.retry('cl-again')).rejects.toMatchObject({ code: 'CONFLICT' });
    await expect(fx.client.retry('cl-nobody')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('purge deletes ended tasks of one state in pages; purgeAll loops while there are more', async () => {
    for (let i = 0; i < 5; i++) {
      await fx.client.submit({ taskId: `purge-${i}`, resource: `cl/purge/${i}`, payload: {}, delayMs: 600_000 });
      await fx.client.cancel(`purge-${i}`);
    }
    // Nothing ended a day ago.
    expect(await fx.client.purge({ state: 'cancelled', olderThanMs: 86_400_000 })).toEqual({ purged: 0, more: false });
    const first = await fx.client.purge({ state: 'cancelled', olderThanMs: 0, limit: 2 });
    expect(first).toEqual({ purged: 2, more: true });
    const rest = await fx.client.purgeAll({ state: 'cancelled', olderThanMs: 0, limit: 2 });
    expect(rest).toBeGreaterThanOrEqual(3);
    for (let i = 0; i < 5; i++) expect(await fx.client.get(`purge-${i}`)).toBeUndefined();
  });
});

describe('waitForResult', () => {
  it('completed: the result reference and the stored result read from the sink', async () => {
    worker((task) => ({ doubled: (task.payload as { n: number }).n * 2 }));
    await fx.client.submit({ taskId: 'w-done', resource: 'cl/w/1', payload: { n: 21 } });
    const result = await fx.client.waitForResult('w-done', { timeoutMs: 20_000 });
    expect(result).toMatchObject({
      state: 'completed',
      resultId: 'task:w-done',
      result: { resource: 'cl/w/1', resultId: 'task:w-done', payload: { doubled: 42 } },
    });
    if (result.state !== 'completed') throw new Error('unreachable');
    expect(result.result?.token).toBe(result.token);
    // Without a sink: the reference only.
    const bare = new LeaseholdClient({ url: fx.coordinator.url, adminKey: fx.stack.keys.adminKey });
    const ref = await bare.waitForResult('w-done', { timeoutMs: 5_000 });
    expect(ref).toMatchObject({ state: 'completed', resultId: 'task:w-done', token: result.token });
    expect(ref).not.toHaveProperty('result');
    await bare.close();
  });

  it('a side-effect-only task (the handler returns nothing): completed, with no result to read at the sink', async () => {
    worker(() => undefined);
    await fx.client.submit({ taskId: 'w-side', resource: 'cl/w/7', payload: {} });
    const done = await fx.client.waitForResult('w-side', { timeoutMs: 20_000 });
    expect(done).toMatchObject({ state: 'completed', resultId: 'task:w-side' });
    expect(done).not.toHaveProperty('result');
    expect(done.task.result).toMatchObject({ noResult: true });
  });

  it('a result schema: the payload checked and typed; a result of another shape is InvalidResultError', async () => {
    worker((task) => ({ doubled: (task.payload as { n: number }).n * 2 }));
    await fx.client.submit<{ n: number }>({ taskId: 'w-typed', resource: 'cl/w/6', payload: { n: 4 } });
    const typed = await fx.client.waitForResult('w-typed', {
      timeoutMs: 20_000,
      result: numberAt('doubled'),
    });
    if (typed.state !== 'completed') throw new Error(`not completed: ${typed.state}`);
    expect(typed.result?.payload.doubled).toBe(8);
    const refused = await fx.client
      .waitForResult('w-typed', { timeoutMs: 5_000, result: numberAt('total') })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidResultError);
    expect(refused).toMatchObject({
      code: 'INVALID_MESSAGE',
      taskId: 'w-typed',
      issues: [{ path: ['total'] }],
      stored: { payload: { doubled: 8 } },
    });
    // The task is completed all the same.
    expect(await fx.client.get('w-typed')).toMatchObject({ state: 'completed' });
  });

  it('failed: the last error and the attempt history', async () => {
    worker(() => {
      throw new NonRetryableError('bad input');
    });
    await fx.client.submit({ taskId: 'w-fail', resource: 'cl/w/2', payload: {} });
    const result = await fx.client.waitForResult('w-fail', { timeoutMs: 20_000 });
    expect(result).toMatchObject({
      state: 'failed',
      error: { name: 'NonRetryableError', message: 'bad input' },
      history: [{ outcome: 'failed', attempt: 1 }],
    });
  });

  it('cancelled: a wait in progress learns of the cancel', async () => {
    await fx.client.submit({ taskId: 'w-cancel', resource: 'cl/w/3', payload: {}, delayMs: 600_000 });
    const states: string[] = [];
    const waiting = fx.client.waitForResult('w-cancel', { timeoutMs: 20_000, onState: (s) => states.push(s) });
    // Once it has read the task (delayed), the wait follows the stream: the cancel arrives as an event.
    await waitFor('the wait to read the task', () => states.includes('delayed'));
    await fx.client.cancel('w-cancel');
    expect(await waiting).toMatchObject({ state: 'cancelled', task: { taskId: 'w-cancel', state: 'cancelled' } });
  });

  it('a task that ended before the wait began is answered from the read, not the stream', async () => {
    await fx.client.submit({ taskId: 'w-before', resource: 'cl/w/4', payload: {}, delayMs: 600_000 });
    await fx.client.cancel('w-before');
    expect(await fx.client.waitForResult('w-before', { timeoutMs: 5_000 })).toMatchObject({ state: 'cancelled' });
  });

  it('gives up with WaitTimeoutError (and the state last seen) at the deadline; unknown tasks are NOT_FOUND', async () => {
    await fx.client.submit({ taskId: 'w-slow', resource: 'cl/w/5', payload: {}, delayMs: 600_000 });
    const started = performance.now();
    const err = await fx.client.waitForResult('w-slow', { timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WaitTimeoutError);
    expect(err).toMatchObject({ taskId: 'w-slow', lastState: 'delayed', code: 'UNAVAILABLE' });
    expect(performance.now() - started).toBeLessThan(5_000);
    await expect(fx.client.waitForResult('w-nobody', { timeoutMs: 5_000 })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    const controller = new AbortController();
    const aborted = fx.client.waitForResult('w-slow', { signal: controller.signal });
    controller.abort(new Error('caller gave up'));
    await expect(aborted).rejects.toThrow('caller gave up');
    await fx.client.cancel('w-slow');
  });
});

describe('event streams', () => {
  it('follows task events across a coordinator going away: resumes on the next URL, nothing lost or repeated', async () => {
    const a = await fx.stack.coordinator(POLICY);
    const b = await fx.stack.coordinator(POLICY);
    const adminB = new LeaseholdClient({ url: b.url, adminKey: fx.stack.keys.adminKey });
    const client = new LeaseholdClient({
      url: [a.url, b.url],
      adminKey: fx.stack.keys.adminKey,
      events: { reconnect: { initialMs: 200, maxMs: 200 }, random: () => 0.99 },
    });
    const controller = new AbortController();
    const seen: CoordinatorEvent[] = [];
    const connectedTo: string[] = [];
    let submittedWhileAway = false;
    const following = (async () => {
      for await (const event of client.events({
        signal: controller.signal,
        onConnected: (url) => connectedTo.push(url),
        onDisconnected: () => {
          if (submittedWhileAway) return;
          submittedWhileAway = true;
          // Happens while the client is away: it must arrive after the reconnect, once.
          void adminB.submit({ taskId: 'ev-2', resource: 'cl/ev/2', payload: {}, delayMs: 600_000 });
        },
      })) {
        seen.push(event);
      }
    })();
    await waitFor('connected to a', () => connectedTo.length === 1);
    await adminB.submit({ taskId: 'ev-1', resource: 'cl/ev/1', payload: {}, delayMs: 600_000 });
    await waitFor('ev-1', () => seen.some((e) => e.type === 'task' && e.taskId === 'ev-1'));
    await a.close();
    await waitFor('ev-2 after the failover', () => seen.some((e) => e.type === 'task' && e.taskId === 'ev-2'));
    await adminB.cancel('ev-1');
    await waitFor('the cancel of ev-1', () => seen.some((e) => e.type === 'task' && e.event === 'cancelled'));
    controller.abort();
    await following;
    expect(connectedTo.at(-1)).toBe(b.url);
    const tasks = seen.filter((e) => e.type === 'task');
    expect(tasks.map((e) => `${e.taskId}:${e.event}`)).toEqual(['ev-1:submitted', 'ev-2:submitted', 'ev-1:cancelled']);
    const revisions = tasks.map((e) => BigInt(e.revision));
    expect(revisions).toEqual([...revisions].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)));
    expect(new Set(revisions.map(String)).size).toBe(revisions.length);
    await adminB.cancel('ev-2');
    await adminB.close();
    await client.close();
  });

  it('resumes after a revision given by the caller; filters by task id', async () => {
    await fx.client.submit({ taskId: 'res-1', resource: 'cl/res/1', payload: {}, delayMs: 600_000 });
    const first = await fx.client.get('res-1');
    expect(first).toBeDefined();
    const controller = new AbortController();
    const seen: CoordinatorEvent[] = [];
    const following = (async () => {
      for await (const event of fx.client.events({ taskId: 'res-1', after: '1', signal: controller.signal })) {
        seen.push(event);
        if (event.type === 'task' && event.event === 'cancelled') controller.abort();
      }
    })();
    await fx.client.submit({ taskId: 'res-other', resource: 'cl/res/2', payload: {}, delayMs: 600_000 });
    await fx.client.cancel('res-1');
    await following;
    // From revision 1: the submit of res-1 (replayed from etcd) and its cancel; nothing of res-other.
    expect(seen.map((e) => (e.type === 'task' ? `${e.taskId}:${e.event}` : e.type))).toEqual([
      'res-1:submitted',
      'res-1:cancelled',
    ]);
    await fx.client.cancel('res-other');
  });

  it("the sink's decisions through the client: grant advance and write of a completed task", async () => {
    const controller = new AbortController();
    const seen: SinkEvent[] = [];
    let connected = false;
    const following = (async () => {
      for await (const event of fx.client.sinkEvents({
        signal: controller.signal,
        onConnected: () => {
          connected = true;
        },
      })) {
        seen.push(event);
        if (event.type === 'decision' && event.kind === 'write' && event.resource === 'cl/sink/1') controller.abort();
      }
    })();
    await waitFor('the sink stream', () => connected);
    worker(() => ({ ok: 1 }));
    await fx.client.submit({ taskId: 'sink-1', resource: 'cl/sink/1', payload: {} });
    await following;
    const mine = seen.filter((e) => e.type === 'decision' && e.resource === 'cl/sink/1');
    expect(mine.map((e) => (e.type === 'decision' ? `${e.kind}:${e.outcome}` : ''))).toEqual([
      'advance:advanced',
      'write:written',
    ]);
  });
});

describe('several coordinator URLs', () => {
  it('a call goes to the next URL when the first cannot be reached', async () => {
    const gone = await fx.stack.coordinator(POLICY);
    const goneUrl = gone.url;
    await gone.close();
    const client = new LeaseholdClient({ url: [goneUrl, fx.coordinator.url], adminKey: fx.stack.keys.adminKey });
    await client.submit({ taskId: 'fo-1', resource: 'cl/fo', payload: {}, delayMs: 600_000 });
    expect((await client.get('fo-1'))?.state).toBe('delayed');
    await client.cancel('fo-1');
    await client.close();
  });
});
