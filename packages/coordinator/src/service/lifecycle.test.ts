/**
 * The task lifecycle on the real services (two coordinators possible), the in-memory etcd and the
 * in-memory fence, with manual clocks: failures, backoff, attempts, lost leases, abandoned grants,
 * cancel, retry, delays and priorities. Each test asserts what a worker or an operator would see.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CoordinatorEvent } from '@leasehold/protocol';
import { EPOCH_MS, ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

/** Sessions outlive each test's waits unless a test lets one expire. */
const TTL = 20_000;
/** 3 attempts, 1 s doubling, no jitter; lost attempts of a peer's session settled after 500 ms. */
const POLICY = {
  SESSION_TTL_MS: String(TTL),
  RETRY_MAX_ATTEMPTS: '3',
  RETRY_INITIAL_MS: '1000',
  RETRY_MULTIPLIER: '2',
  RETRY_JITTER: '0',
  SETTLE_GRACE_MS: '500',
};

let cluster: ServiceCluster;
let c1: TestCoordinator;

async function setup(env: Record<string, string> = POLICY): Promise<void> {
  cluster = new ServiceCluster(env);
  c1 = await cluster.coordinator('c1');
}

afterEach(async () => {
  await cluster.close();
});

describe('handler failures', () => {
  it('a failing task is tried exactly maxAttempts times, with the backoff between grants, then fails', async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const grantTimes: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      // Not before its time: a plain acquire finds nothing until the backoff has passed.
      for (;;) {
        const reply = await cluster.acquire(w);
        if (reply.type === 'lease.granted') {
          expect(reply.attempt).toBe(attempt);
          grantTimes.push(cluster.clock.nowMs());
          const failed = await cluster.fail(w, 't1', 'r1', tokenOf(reply));
          expect(failed).toMatchObject({ type: 'task.failed', outcome: attempt < 3 ? 'retrying' : 'failed' });
          break;
        }
        expect(reply.type).toBe('lease.none');
        await cluster.advance(100);
      }
    }
    // Backoff: 1 s after the first failure, 2 s after the second (within one 100 ms step).
    const gaps = [(grantTimes[1] ?? 0) - (grantTimes[0] ?? 0), (grantTimes[2] ?? 0) - (grantTimes[1] ?? 0)];
    expect(gaps[0]).toBeGreaterThanOrEqual(1_000);
    expect(gaps[0]).toBeLessThan(1_100);
    expect(gaps[1]).toBeGreaterThanOrEqual(2_000);
    expect(gaps[1]).toBeLessThan(2_100);
    const view = await c1.services.tasks.get('t1');
    expect(view).toMatchObject({ state: 'failed', attempts: 3, lastError: { name: 'Error', message: 'boom' } });
    expect(view?.history?.map((h) => [h.attempt, h.outcome])).toEqual([
      [1, 'failed'],
      [2, 'failed'],
      [3, 'failed'],
    ]);
    // A failed task is never granted again.
    await cluster.advance(60_000);
    expect((await cluster.acquire(await cluster.worker(c1, 'w-later'))).type).toBe('lease.none');
    expect((await c1.services.tasks.list({ state: 'failed', limit: 10 })).tasks.map((t) => t.taskId)).toEqual(['t1']);
  });

  it('a non-retryable error fails the task at once (by the flag, or by name in the policy)', async () => {
    await setup();
    await cluster.submit(c1, 'flag', 'r1');
    await cluster.submit(c1, 'named', 'r2', { n: 1 }, { retry: { nonRetryable: ['BadInput'] } });
    const w = await cluster.worker(c1, 'w1');
    const a = await cluster.acquire(w, { taskId: 'flag' });
    expect(
      await cluster.fail(w, 'flag', 'r1', tokenOf(a), { name: 'NonRetryableError', message: 'no', retryable: false }),
    ).toMatchObject({ outcome: 'failed' });
    const b = await cluster.acquire(w, { taskId: 'named' });
    expect(
      await cluster.fail(w, 'named', 'r2', tokenOf(b), { name: 'BadInput', message: 'no', retryable: true }),
    ).toMatchObject({ outcome: 'failed' });
    expect(await c1.services.tasks.get('flag')).toMatchObject({ state: 'failed', attempts: 1 });
    expect(await c1.services.tasks.get('named')).toMatchObject({ state: 'failed', attempts: 1 });
  });

  it('only the holder can fail an attempt; a repeated task.fail gets the same answer', async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    const w1 = await cluster.worker(c1, 'w1');
    const w2 = await cluster.worker(c1, 'w2');
    const token = tokenOf(await cluster.acquire(w1));
    expect(await cluster.fail(w2, 't1', 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.fail(w1, 't1', 'r1', token + 1n)).toMatchObject({ code: 'NOT_HOLDER' });
    const first = await cluster.fail(w1, 't1', 'r1', token);
    expect(first).toMatchObject({ type: 'task.failed', outcome: 'retrying' });
    const again = await cluster.fail(w1, 't1', 'r1', token);
    expect(again).toMatchObject({ type: 'task.failed', outcome: 'retrying' });
    expect((await c1.services.tasks.get('t1'))?.history).toHaveLength(1);
  });
});

describe('lost leases', () => {
  it('a task whose worker dies every time ends failed after maxAttempts lost leases', async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    for (let attempt = 1; attempt <= 3; attempt += 1) {
      const w = await cluster.worker(c1, `w${attempt}`);
      let reply = await cluster.acquire(w);
      while (reply.type !== 'lease.granted') {
        await cluster.advance(100);
        reply = await cluster.acquire(w);
      }
      // The worker dies: no heartbeat, no result. Its session ends at the deadline.
      await cluster.advance(TTL + 10);
    }
    const view = await c1.services.tasks.get('t1');
    expect(view).toMatchObject({ state: 'failed', attempts: 3, lastError: { name: 'LeaseExpired' } });
    expect(view?.history?.map((h) => h.outcome)).toEqual(['expired', 'expired', 'expired']);
  });

  it("a peer settles a lost attempt of a dead coordinator's session after the grace, once", async () => {
    await setup();
    const c2 = await cluster.coordinator('c2');
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    // c1 dies without ending the session: the etcd lease expires; c2 sees the owner key go.
    c1.backend.close();
    await c1.services.close();
    // The etcd lease (session TTL + a margin of max(TTL, 10 s)) expires; c2 sees the owner key go.
    await cluster.advance(2 * TTL + 2_000);
    const view = await c2.services.tasks.get('t1');
    expect(view?.history).toEqual([expect.objectContaining({ outcome: 'expired', token: token.toString() })]);
    expect(view?.state).toBe('pending');
    expect(c2.services.settle.scheduled).toBe(0);
  });
});

describe('sink outages', () => {
  it('an abandoned grant gives its attempt back and the task backs off: bounded grant attempts', async () => {
    await setup({ ...POLICY, RETRY_MAX_ATTEMPTS: '2' });
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    cluster.fence.down = true;
    let abandonedGrants = 0;
    // A 10 s outage, a worker asking every 100 ms.
    for (let t = 0; t < 10_000; t += 100) {
      const before = cluster.fence.log.length;
      const reply = await cluster.acquire(w);
      expect(reply.type).not.toBe('lease.granted');
      if (reply.type === 'error') abandonedGrants += 1;
      expect(cluster.fence.log.length).toBe(before);
      await cluster.advance(100);
      cluster.heartbeat(w);
    }
    // 1 + 2 + 4 s of backoff fit in 10 s: 4 grant attempts, not 100.
    expect(abandonedGrants).toBe(4);
    const view = await c1.services.tasks.get('t1');
    expect(view).toMatchObject({ state: 'delayed', attempts: 0 });
    expect(view?.history?.every((h) => h.outcome === 'abandoned')).toBe(true);
    cluster.fence.down = false;
    await cluster.advance(10_000);
    const granted = await cluster.acquire(await cluster.worker(c1, 'w2'));
    expect(granted).toMatchObject({ type: 'lease.granted', attempt: 1 });
  });
});

describe('cancel', () => {
  it("cancelling a held task revokes the lease and advances the fence: the holder's late write is refused", async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    const res = await c1.services.tasks.cancel('t1');
    expect(res).toMatchObject({ ok: true, task: { state: 'cancelled' } });
    await cluster.settle();
    expect(w.channel.pushes('lease.revoked')).toEqual([
      expect.objectContaining({ resource: 'r1', token: token.toString(), reason: 'cancelled' }),
    ]);
    expect(cluster.fence.fence('r1')).toBeGreaterThan(token);
    expect(cluster.fence.write('r1', token)).toBe('STALE_TOKEN');
    expect(await cluster.complete(w, 't1', 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect((await c1.services.tasks.get('t1'))?.history?.map((h) => h.outcome)).toEqual(['cancelled']);
  });

  it('a cancel whose fence advance fails answers UNAVAILABLE; cancelling again advances it', async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    cluster.fence.down = true;
    const cancel = c1.services.tasks.cancel('t1');
    const outcome = cancel.then(
      () => 'ok',
      (err: unknown) => (err as { code?: string }).code,
    );
    await cluster.advance(5_000);
    expect(await outcome).toBe('UNAVAILABLE');
    expect(cluster.fence.write('r1', token)).toBe('written');
    cluster.fence.down = false;
    expect(await c1.services.tasks.cancel('t1')).toMatchObject({ ok: true });
    expect(cluster.fence.write('r1', token)).toBe('STALE_TOKEN');
  });
});

describe('retry and purge', () => {
  it('retry makes a failed task pending with a fresh budget; purge deletes old terminal tasks only', async () => {
    await setup();
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 'other', 'r2');
    const w = await cluster.worker(c1, 'w1');
    const a = await cluster.acquire(w, { taskId: 't1' });
    await cluster.fail(w, 't1', 'r1', tokenOf(a), { name: 'Fatal', message: 'x', retryable: false });
    expect(await c1.services.tasks.retry('other')).toMatchObject({ ok: false, code: 'CONFLICT' });
    expect(await c1.services.tasks.retry('nope')).toMatchObject({ ok: false, code: 'NOT_FOUND' });
    expect(await c1.services.tasks.retry('t1')).toMatchObject({ ok: true, task: { state: 'pending', attempts: 0 } });
    await cluster.settle();
    const b = await cluster.acquire(w, { taskId: 't1' });
    expect(b).toMatchObject({ type: 'lease.granted', attempt: 1 });
    expect(await cluster.complete(w, 't1', 'r1', tokenOf(b))).toMatchObject({ type: 'task.completed' });
    const view = await c1.services.tasks.get('t1');
    expect(view?.state).toBe('completed');
    expect(view?.history?.map((h) => h.outcome)).toEqual(['failed', 'completed']);
    // Purge: completed more than 1 h ago. Not yet...
    expect(await c1.services.tasks.purge({ state: 'completed', olderThanMs: 3_600_000 })).toEqual({
      purged: 0,
      more: false,
    });
    await cluster.advance(3_600_000);
    expect(await c1.services.tasks.purge({ state: 'completed', olderThanMs: 3_600_000 })).toEqual({
      purged: 1,
      more: false,
    });
    expect(await c1.services.tasks.get('t1')).toBeUndefined();
    expect(await c1.services.tasks.get('other')).toBeDefined();
  });
});

describe('delays and priorities', () => {
  it('a delayed task is not granted before its time; a waiting acquire gets it when it comes due', async () => {
    await setup();
    await cluster.submit(c1, 'later', 'r1', { n: 1 }, { delayMs: 5_000 });
    expect((await c1.services.tasks.get('later'))?.state).toBe('delayed');
    const w = await cluster.worker(c1, 'w1');
    expect((await cluster.acquire(w)).type).toBe('lease.none');
    const waiting = cluster.acquire(w, { waitMs: 10_000 });
    await cluster.advance(4_999);
    let settled = false;
    void waiting.then(() => (settled = true));
    await cluster.settle();
    expect(settled).toBe(false);
    await cluster.advance(1);
    expect(await waiting).toMatchObject({ type: 'lease.granted', taskId: 'later' });
  });

  it('a long poll that began before a delayed task was submitted gets it when it comes due, not when the poll runs out', async () => {
    await setup();
    const w = await cluster.worker(c1, 'w1');
    // Waiting with nothing pending at all: its wait is timed by waitMs alone.
    const waiting = cluster.acquire(w, { waitMs: 10_000 });
    await cluster.settle();
    await cluster.submit(c1, 'soon', 'r1', { n: 1 }, { delayMs: 2_000 });
    await cluster.advance(1_999);
    let settled = false;
    void waiting.then(() => (settled = true));
    await cluster.settle();
    expect(settled).toBe(false);
    await cluster.advance(1);
    expect(await waiting).toMatchObject({ type: 'lease.granted', taskId: 'soon' });
  });

  it("a delayed task that comes due between a long poll's select and its wait is granted then, not when the poll runs out", async () => {
    await setup();
    await cluster.submit(c1, 'soon', 'r1', { n: 1 }, { delayMs: 2_000 });
    const w = await cluster.worker(c1, 'w1');
    await cluster.advance(1_999);
    // The clock crosses the due time right after the acquire's select (found nothing, 1 ms early)
    // and before it times its wait: the wait must still end at the due time.
    let crossed = false;
    cluster.jumpAfterSelects(c1, (n) => {
      if (n > 0) return 0;
      crossed = true;
      return 1;
    });
    const waiting = cluster.acquire(w, { waitMs: 10_000 });
    let settled = false;
    void waiting.then(() => (settled = true));
    await cluster.settle();
    expect(crossed).toBe(true);
    await cluster.advance(1);
    expect(settled).toBe(true);
    expect(await waiting).toMatchObject({ type: 'lease.granted', taskId: 'soon' });
  });

  it('runAt is honoured; runAt and delayMs together are refused', async () => {
    await setup();
    const at = new Date(EPOCH_MS + cluster.clock.nowMs() + 2_000).toISOString();
    await cluster.submit(c1, 'at', 'r1', { n: 1 }, { runAt: at });
    const both = await c1.services.tasks.submit({ taskId: 'x', resource: 'r', payload: 1, runAt: at, delayMs: 1 });
    expect(both).toMatchObject({ ok: false, code: 'INVALID_MESSAGE' });
    const w = await cluster.worker(c1, 'w1');
    expect((await cluster.acquire(w)).type).toBe('lease.none');
    await cluster.advance(2_000);
    expect(await cluster.acquire(w)).toMatchObject({ type: 'lease.granted', taskId: 'at' });
  });

  it('higher priorities are granted first, oldest first within a priority', async () => {
    await setup();
    await cluster.submit(c1, 'low-1', 'r1', { n: 1 }, { priority: 0 });
    await cluster.submit(c1, 'high-1', 'r2', { n: 1 }, { priority: 9 });
    await cluster.submit(c1, 'mid', 'r3', { n: 1 }, { priority: 5 });
    await cluster.submit(c1, 'high-2', 'r4', { n: 1 }, { priority: 9 });
    await cluster.submit(c1, 'low-2', 'r5');
    const w = await cluster.worker(c1, 'w1');
    const order: string[] = [];
    for (let i = 0; i < 5; i += 1) {
      const reply = await cluster.acquire(w);
      if (reply.type !== 'lease.granted') throw new Error(reply.type);
      order.push(reply.taskId);
    }
    expect(order).toEqual(['high-1', 'high-2', 'mid', 'low-1', 'low-2']);
  });

  it('two coordinators: the backoff written by one is honoured by the other', async () => {
    await setup();
    const c2 = await cluster.coordinator('c2');
    await cluster.submit(c1, 't1', 'r1');
    const w1 = await cluster.worker(c1, 'w1');
    const w2 = await cluster.worker(c2, 'w2');
    const token = tokenOf(await cluster.acquire(w1));
    await cluster.fail(w1, 't1', 'r1', token);
    await cluster.settle();
    expect((await cluster.acquire(w2)).type).toBe('lease.none');
    await cluster.advance(999);
    expect((await cluster.acquire(w2)).type).toBe('lease.none');
    await cluster.advance(1);
    expect(await cluster.acquire(w2)).toMatchObject({ type: 'lease.granted', attempt: 2 });
  });
});

describe('the event stream', () => {
  it('streams each change of a task, and resumes after the last revision seen', async () => {
    await setup();
    const seen: CoordinatorEvent[] = [];
    const sub = await c1.services.events.subscribe({
      sink: { send: (e) => seen.push(e), end: () => undefined },
    });
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    await cluster.fail(w, 't1', 'r1', token);
    await cluster.settle();
    sub.close();
    const kinds = seen.map((e) => (e.type === 'task' ? [e.event, e.state] : [e.type]));
    expect(kinds).toEqual([
      ['submitted', 'pending'],
      ['granted', 'leased'],
      ['retrying', 'delayed'],
    ]);
    expect(seen[1]).toMatchObject({ token: token.toString(), workerId: 'w1' });
    expect(seen[2]).toMatchObject({ token: token.toString(), error: { name: 'Error' } });
    // Resume from the first event: the two after it, exactly.
    const first = seen[0];
    if (first?.type !== 'task') throw new Error('no first event');
    const again: CoordinatorEvent[] = [];
    const resumed = await c1.services.events.subscribe({
      afterRevision: BigInt(first.revision),
      taskId: 't1',
      sink: { send: (e) => again.push(e), end: () => undefined },
    });
    await cluster.settle();
    resumed.close();
    expect(again.map((e) => (e.type === 'task' ? e.event : e.type))).toEqual(['granted', 'retrying']);
  });
});
