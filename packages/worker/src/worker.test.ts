/**
 * The Worker over an injected transport and sink (no sockets): its lifecycle and events, the
 * handler's AbortSignal, unguessable request ids, a grant written under its own token and completed
 * exactly once, typed payloads with a schema, side-effect-only tasks, runtime concurrency and the
 * status stream. (Options and fatal refusals: worker-lifecycle.test.ts.)
 */
import type { JsonValue } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { WorkerEventOf, WorkerStatus } from './events.js';
import { FakeCoordinator, FakeSink, fakeWorkerOptions, until } from './testing/fake-coordinator.js';
import type { GrantProof } from './types.js';
import { Worker } from './worker.js';

function worker(coordinator: FakeCoordinator, sink: FakeSink, handler = (t: { payload: JsonValue }) => t.payload) {
  return new Worker({ ...fakeWorkerOptions(coordinator, sink), handler });
}

describe('Worker', () => {
  it('runs a grant once: writes under its token with the business result id, then completes', async () => {
    const coordinator = new FakeCoordinator();
    const sink = new FakeSink();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '42', payload: { n: 1 } });
    const w = worker(coordinator, sink);
    const completed: WorkerEventOf<'completed'>[] = [];
    w.on('completed', (e) => completed.push(e));
    const done = w.run();
    await until(() => completed.length === 1);
    expect(sink.writes).toEqual([
      expect.objectContaining({ resource: 'r1', token: 42n, resultId: 'task:t1', payload: { n: 1 } }),
    ]);
    expect(coordinator.sent('task.complete')).toEqual([
      expect.objectContaining({ taskId: 't1', resource: 'r1', token: '42', resultId: 'task:t1' }),
    ]);
    expect(completed[0]?.withResult).toBe(true);
    await w.close(100);
    await done;
    expect(w.state).toBe('closed');
  });

  it('moves through its states and tells listeners (closing, closed); off() stops telling', async () => {
    const w = worker(new FakeCoordinator(), new FakeSink());
    const states: string[] = [];
    const all: string[] = [];
    const onAll = (e: WorkerEventOf<'*'>) => all.push(e.type);
    w.on('state', (e) => states.push(e.state)).on('*', onAll);
    expect(w.state).toBe('created');
    const done = w.run();
    await until(() => w.connected);
    const closing: string[] = [];
    w.once('closing', (e) => closing.push(e.reason)).on('closed', () => closing.push('closed'));
    w.off('*', onAll);
    await w.close(100);
    await done;
    expect(states).toEqual(['running', 'closing', 'closed']);
    expect(all).toEqual(['state']);
    expect(closing).toEqual(['close', 'closed']);
  });

  it('asks with unguessable request ids (128 random bits, never a counter)', async () => {
    const coordinator = new FakeCoordinator();
    const w = worker(coordinator, new FakeSink());
    void w.run();
    await until(() => coordinator.sent('lease.acquire').length >= 5);
    await w.close(100);
    const ids = coordinator.sent('lease.acquire').map((r) => r.requestId);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).not.toContain(w.workerId);
      expect(id.length).toBeGreaterThanOrEqual(22);
    }
  });

  it("aborts the handler's signal when the coordinator revokes its lease, and does not complete", async () => {
    const coordinator = new FakeCoordinator();
    const sink = new FakeSink();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '7', payload: 1 });
    let aborted: unknown;
    const lost: WorkerEventOf<'lease-lost'>[] = [];
    const running = new Worker({
      ...fakeWorkerOptions(coordinator, sink),
      handler: (_task, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            aborted = ctx.signal.reason;
            reject(ctx.signal.reason as Error);
          });
          coordinator.push?.({ type: 'lease.revoked', resource: 'r1', token: '7', reason: 'cancelled' });
        }),
    });
    running.on('lease-lost', (e) => lost.push(e));
    void running.run();
    await until(() => lost.length === 1);
    expect(String(aborted)).toMatch(/revoked: cancelled/);
    expect(sink.writes).toEqual([]);
    expect(coordinator.sent('task.complete')).toEqual([]);
    await running.close(100);
  });

  it('a LEASE_EXPIRED answer ends the session for the worker: its next hello opens a fresh one, never resumes', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.expireOnComplete = true;
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '7', payload: 1 });
    const running = worker(coordinator, new FakeSink());
    void running.run();
    await until(() => coordinator.sent('hello').length >= 2);
    expect(coordinator.sent('task.complete').length).toBeGreaterThan(0);
    expect(coordinator.sent('hello')[1]).not.toHaveProperty('resumeSessionId');
    await running.close(100);
  });

  it('on close, a task that honours its signal after the grace is released, not completed', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '9', payload: 1 });
    let started = false;
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      handler: (_task, ctx) => {
        started = true;
        return new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reject(ctx.signal.reason as Error);
          });
        });
      },
    });
    void w.run();
    await until(() => started);
    await w.close(50);
    expect(coordinator.sent('lease.release')).toEqual([
      expect.objectContaining({ resource: 'r1', token: '9', reason: 'worker shutting down' }),
    ]);
    expect(w.stats).toMatchObject({ granted: 1, released: 1, completed: 0 });
  });

  it('on close, a handler that ignores its signal holds nothing up past grace + force: its lease is released', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '11', payload: 1 });
    let started = false;
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      shutdown: { graceMs: 20, forceMs: 30 },
      handler: () => {
        started = true;
        return new Promise<never>(() => undefined); // never settles, ignores the signal
      },
    });
    const done = w.run();
    await until(() => started);
    const t0 = performance.now();
    await w.close();
    await done;
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(coordinator.sent('lease.release')).toEqual([expect.objectContaining({ resource: 'r1', token: '11' })]);
  });

  it('a grant that arrives while the worker closes is released without running its handler', async () => {
    const coordinator = new FakeCoordinator();
    let letGo!: () => void;
    coordinator.holdAcquires = new Promise((resolve) => (letGo = resolve));
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '13', payload: 1 });
    let ran = false;
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      handler: () => {
        ran = true;
        return 1;
      },
    });
    void w.run();
    await until(() => coordinator.sent('lease.acquire').length === 1);
    const closed = w.close(1_000);
    letGo();
    await closed;
    expect(ran).toBe(false);
    expect(coordinator.sent('lease.release')).toEqual([expect.objectContaining({ token: '13' })]);
  });

  describe('a completion carries the slot’s next acquire (complete.next)', () => {
    /** The acquires and completes the worker sent, in order (a carried acquire inside its complete). */
    const asked = (c: FakeCoordinator) =>
      c.requests
        .filter((r) => r.type === 'lease.acquire' || r.type === 'task.complete')
        .map((r) => (r.type === 'task.complete' ? (r.next === undefined ? 'complete' : 'complete+next') : 'acquire'));

    /** Grant tasks t1..tn to a worker, run it until all n completed, close it; the completed ids. */
    async function completeTasks(coordinator: FakeCoordinator, n: number): Promise<string[]> {
      for (let i = 1; i <= n; i++)
        coordinator.grants.push({ taskId: `t${i}`, resource: `r${i}`, token: `${i}`, payload: i });
      const w = worker(coordinator, new FakeSink());
      const completed: string[] = [];
      w.on('completed', (e) => completed.push(e.taskId));
      void w.run();
      await until(() => completed.length === n);
      await w.close(100);
      return completed;
    }

    it('to a coordinator that takes one: one frame per task, each next acquire with its own request id', async () => {
      const coordinator = new FakeCoordinator();
      coordinator.carries = true;
      const completed = await completeTasks(coordinator, 3);
      // The first acquire is a frame of its own; tasks 2 and 3 came from acquires carried by the
      // completions of 1 and 2 (no lease.acquire between them).
      expect(asked(coordinator).slice(0, 4)).toEqual(['acquire', 'complete+next', 'complete+next', 'complete+next']);
      const carried = coordinator.sent('task.complete').map((c) => c.next?.requestId);
      expect(new Set(carried).size).toBe(carried.length);
      expect(carried).not.toContain(coordinator.sent('lease.acquire')[0]?.requestId);
      expect(completed).toEqual(['t1', 't2', 't3']);
    });

    it('to a coordinator that does not name the feature: the completion carries nothing', async () => {
      const coordinator = new FakeCoordinator();
      await completeTasks(coordinator, 2);
      expect(asked(coordinator).slice(0, 4)).toEqual(['acquire', 'complete', 'acquire', 'complete']);
    });

    it('a grant for a carried acquire that arrives while the worker closes is released, its handler never run', async () => {
      const coordinator = new FakeCoordinator();
      coordinator.carries = true;
      coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '1', payload: 1 });
      coordinator.grants.push({ taskId: 't2', resource: 'r2', token: '2', payload: 2 });
      const ran: string[] = [];
      let letGo!: () => void;
      const w = new Worker({
        ...fakeWorkerOptions(coordinator, new FakeSink()),
        handler: (task) => {
          ran.push(task.taskId);
          // Hold t1's completion (and so the acquire it carries) until the worker is closing: the
          // slot learns it should not go on only after its completion carried the next acquire.
          coordinator.holdCompletes = new Promise((resolve) => (letGo = resolve));
          return 1;
        },
      });
      void w.run();
      await until(() => coordinator.sent('task.complete').length === 1);
      expect(coordinator.sent('task.complete')[0]?.next).toBeDefined();
      const closed = w.close(1_000);
      coordinator.holdCompletes = undefined;
      letGo();
      await closed;
      expect(ran).toEqual(['t1']);
      expect(coordinator.sent('lease.release')).toEqual([expect.objectContaining({ resource: 'r2', token: '2' })]);
    });
  });

  describe('a closing worker ends its long polls (session.drain)', () => {
    /** A worker with the SDK's default long poll, idle (nothing to grant), until its first acquire. */
    async function idleWorker(coordinator: FakeCoordinator): Promise<Worker> {
      const { acquireWaitMs: _unset, ...opts } = fakeWorkerOptions(coordinator, new FakeSink());
      const w = new Worker({ ...opts, handler: () => 1 });
      void w.run();
      await until(() => coordinator.sent('lease.acquire').length === 1);
      return w;
    }

    it('to a coordinator that takes it: 10 s long polls, and close tells it to answer them now', async () => {
      const coordinator = new FakeCoordinator();
      coordinator.drains = true;
      const w = await idleWorker(coordinator);
      expect(coordinator.sent('lease.acquire')[0]?.waitMs).toBe(10_000);
      await w.close(1_000);
      expect(coordinator.sent('session.drain')).toEqual([expect.objectContaining({ sessionId: 'abc1' })]);
      // The long poll in flight ended on the drain, not by running out (the close did not wait for it).
      expect(coordinator.pollsRunOut).toBe(0);
    });

    it('to a coordinator that does not: 1 s long polls, and no drain frame', async () => {
      const coordinator = new FakeCoordinator();
      const w = await idleWorker(coordinator);
      expect(coordinator.sent('lease.acquire')[0]?.waitMs).toBe(1_000);
      await w.close(1_000);
      expect(coordinator.sent('session.drain')).toEqual([]);
    });
  });

  it('hands the handler the grant proof as one value', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.grants.push({ taskId: 't1', resource: 'acct/1', token: '77', payload: null });
    let proof: GrantProof | undefined;
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      workerId: 'w-proof',
      incarnation: 'inc-9',
      handler: (_task, ctx) => {
        proof = ctx.grant;
        return undefined;
      },
    });
    void w.run();
    await until(() => proof !== undefined);
    await w.close(100);
    expect(proof).toEqual({
      taskId: 't1',
      resource: 'acct/1',
      token: 77n,
      capability: 'cap',
      workerId: 'w-proof',
      incarnation: 'inc-9',
      attempt: 1,
      resultId: 'task:t1',
    });
    expect(Object.isFrozen(proof)).toBe(true);
  });

  it('a handler that returns nothing completes its task with no sink write (a side-effect-only task)', async () => {
    const coordinator = new FakeCoordinator();
    const sink = new FakeSink();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '5', payload: {} });
    const completed: WorkerEventOf<'completed'>[] = [];
    const w = new Worker({ ...fakeWorkerOptions(coordinator, sink), handler: () => undefined });
    w.on('completed', (e) => completed.push(e));
    void w.run();
    await until(() => completed.length === 1);
    await w.close(100);
    expect(sink.writes).toEqual([]);
    expect(coordinator.sent('task.complete')).toEqual([expect.objectContaining({ taskId: 't1', resultId: 'task:t1' })]);
    expect(coordinator.sent('task.fail')).toEqual([]);
    expect(completed[0]?.withResult).toBe(false);
  });

  it('validates payloads with a Standard Schema: a bad one fails the task at once (non-retryable), naming the issue', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.grants.push({ taskId: 'bad', resource: 'r1', token: '3', payload: { n: 'one' } });
    coordinator.grants.push({ taskId: 'good', resource: 'r2', token: '4', payload: { n: 2 } });
    const seen: number[] = [];
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      payload: z.object({ n: z.number() }).transform((p) => ({ doubled: p.n * 2 })),
      handler: (task) => {
        seen.push(task.payload.doubled); // typed by the schema's output
        return { doubled: task.payload.doubled };
      },
    });
    void w.run();
    await until(() => coordinator.sent('task.complete').length === 1 && coordinator.sent('task.fail').length === 1);
    await w.close(100);
    expect(seen).toEqual([4]);
    const [fail] = coordinator.sent('task.fail');
    expect(fail).toMatchObject({ taskId: 'bad', error: { name: 'InvalidPayloadError', retryable: false } });
    expect(fail?.error.message).toMatch(/payload refused by the worker's schema \(zod\): n: /);
  });

  it('runtime concurrency: setConcurrency raises the slots while running, up to maxConcurrency', async () => {
    const coordinator = new FakeCoordinator();
    for (let i = 0; i < 3; i++)
      coordinator.grants.push({ taskId: `t${i}`, resource: `r${i}`, token: `${10 + i}`, payload: i });
    let inFlight = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const w = new Worker({
      ...fakeWorkerOptions(coordinator, new FakeSink()),
      concurrency: 1,
      maxConcurrency: 3,
      handler: async () => {
        inFlight += 1;
        await gate;
        return 1;
      },
    });
    void w.run();
    await until(() => inFlight === 1);
    expect(coordinator.sent('hello')[0]).toMatchObject({ capacity: 3 });
    w.setConcurrency(3);
    expect(w.concurrency).toBe(3);
    await until(() => inFlight === 3);
    expect(() => {
      w.setConcurrency(4);
    }).toThrow(/1\.\.3/);
    release();
    await until(() => coordinator.sent('task.complete').length === 3);
    await w.close(100);
  });

  it('stats is a read-only snapshot', async () => {
    const w = worker(new FakeCoordinator(), new FakeSink());
    const stats = w.stats;
    expect(Object.isFrozen(stats)).toBe(true);
    expect(() => {
      (stats as { granted: number }).granted = 9;
    }).toThrow();
    await w.close();
  });

  it('status() streams the link as it changes and ends when the worker is closed', async () => {
    const w = worker(new FakeCoordinator(), new FakeSink());
    const seen: WorkerStatus[] = [];
    const reading = (async () => {
      for await (const s of w.status()) seen.push(s);
    })();
    void w.run();
    await until(() => seen.some((s) => s.type === 'connected'));
    await w.close(100);
    await reading;
    expect(seen.map((s) => (s.type === 'state' ? `state:${s.state}` : s.type))).toEqual([
      'state:running',
      'connected',
      'state:closing',
      'state:closed',
    ]);
  });
});
