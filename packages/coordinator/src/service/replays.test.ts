/**
 * A repeated `task.complete` / `task.fail` (the first reply was lost) is answered as a replay — but
 * only to the session that ended the attempt. Anyone else quoting the same task id, resource and
 * token — another worker, or the same worker id in another session — gets NOT_HOLDER and learns
 * nothing of the outcome. `lease.release` has no replay: a repeat is NOT_HOLDER for everyone.
 *
 * Mechanism under test: `endedBy` (core/lifecycle.ts) in `LeaseService.#complete` and
 * `#failReplay`. Replace either check by the old "token and outcome match" and the intruder cases
 * here answer `task.completed` / `task.failed`.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceCluster, tokenOf, type TestCoordinator, type TestWorkerHandle } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;
let holder: TestWorkerHandle;
let intruder: TestWorkerHandle;
/** The holder's worker id, in a session of its own (a second process with the same credential). */
let twin: TestWorkerHandle;

beforeEach(async () => {
  cluster = new ServiceCluster();
  c1 = await cluster.coordinator();
  holder = await cluster.worker(c1, 'w-holder', 'inc-1');
  // Same incarnation as the holder: the frames they send are exactly the holder's.
  intruder = await cluster.worker(c1, 'w-intruder', 'inc-1');
  twin = await cluster.worker(c1, 'w-holder', 'inc-1');
});
afterEach(async () => {
  await cluster.close();
});

describe('replay of an ended attempt', () => {
  it("task.complete: the holder's repeat is a replay; another worker or session gets NOT_HOLDER", async () => {
    await cluster.submit(c1, 't1', 'r1');
    const token = tokenOf(await cluster.acquire(holder, { taskId: 't1' }));
    expect(await cluster.complete(holder, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });

    expect(await cluster.complete(intruder, 't1', 'r1', token)).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    expect(await cluster.complete(twin, 't1', 'r1', token)).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    // The holder's own repeat (its reply was lost) gets the same answer as the first time.
    expect(await cluster.complete(holder, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });
  });

  it("task.fail: the holder's repeat is a replay; another worker or session gets NOT_HOLDER", async () => {
    await cluster.submit(c1, 't1', 'r1');
    const token = tokenOf(await cluster.acquire(holder, { taskId: 't1' }));
    const first = await cluster.fail(holder, 't1', 'r1', token);
    expect(first).toMatchObject({ type: 'task.failed', outcome: 'retrying' });

    expect(await cluster.fail(intruder, 't1', 'r1', token)).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    expect(await cluster.fail(twin, 't1', 'r1', token)).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    const { inReplyTo: _first, ...answer } = first as Extract<typeof first, { type: 'task.failed' }>;
    expect(await cluster.fail(holder, 't1', 'r1', token)).toMatchObject(answer);
    // Nothing was recorded by the refused ones.
    expect((await c1.services.tasks.get('t1'))?.history).toHaveLength(1);
  });

  it('task.fail that ended the task (non-retryable): still only the holder hears "failed"', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const token = tokenOf(await cluster.acquire(holder, { taskId: 't1' }));
    const fatal = { name: 'Fatal', message: 'no', retryable: false };
    expect(await cluster.fail(holder, 't1', 'r1', token, fatal)).toMatchObject({ outcome: 'failed' });
    expect(await cluster.fail(intruder, 't1', 'r1', token, fatal)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.fail(holder, 't1', 'r1', token, fatal)).toMatchObject({ outcome: 'failed' });
  });

  it('lease.release: a repeat is NOT_HOLDER for everyone (no replay, nothing learnt)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const token = tokenOf(await cluster.acquire(holder, { taskId: 't1' }));
    expect(await cluster.release(intruder, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.release(twin, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.release(holder, 'r1', token)).toMatchObject({ type: 'lease.released' });
    expect(await cluster.release(intruder, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.release(holder, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
  });

  it('a replay survives the session moving to another coordinator (the record names the session)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const token = tokenOf(await cluster.acquire(holder, { taskId: 't1' }));
    expect(await cluster.complete(holder, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });
    const c2 = await cluster.coordinator('c2');
    const { opened } = await cluster.resume(holder, c2);
    expect(opened.resumed).toBe(true);
    const moved = { ...holder, session: opened.session, coordinator: c2 };
    expect(await cluster.complete(moved, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });
    const stranger = await cluster.worker(c2, 'w-intruder', 'inc-1');
    expect(await cluster.complete(stranger, 't1', 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
  });
});
