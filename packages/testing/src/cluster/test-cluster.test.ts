/**
 * The helpers of the in-process cluster, each on the mechanism it stands for: expiry only by the
 * manual clock, a paused worker's frames and writes held, a takeover moving the fence first, the
 * design note's non-guarantee (expiry alone does not stop a write), backoffs on manual time.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TestCluster } from './test-cluster.js';

describe('TestCluster', () => {
  let cluster: TestCluster;
  beforeEach(async () => {
    cluster = await TestCluster.start();
  });
  afterEach(async () => {
    await cluster.close();
  });

  it('runs a handler: its result is stored under its token, after the fence moved to it', async () => {
    const w = cluster.worker({ workerId: 'w', handler: (task) => ({ doubled: (task.payload as number) * 2 }) });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: 21 });
    const done = await w.next('completed');
    expect(await cluster.results('r1')).toEqual([
      expect.objectContaining({ resultId: 'task:t1', token: done.token, workerId: 'w', payload: { doubled: 42 } }),
    ]);
    expect((await cluster.decisions('r1')).map((d) => [d.kind, d.outcome, d.token])).toEqual([
      ['advance', 'advanced', done.token],
      ['write', 'written', done.token],
    ]);
    expect((await cluster.task('t1'))?.state).toBe('completed');
  });

  it('a session does not expire on its own: only the manual clock ends it', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const w = cluster.worker({ workerId: 'w', handler: async () => held.then(() => 'done') });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: null });
    const grant = await w.next('granted');
    w.pause();
    await cluster.advance(5_000); // half the session TTL: still held
    expect((await cluster.coordinator.tasks.resource('r1')).token).toBe(grant.token.toString());
    await cluster.advance(5_001);
    await cluster.waitFor(async () => (await cluster.coordinator.tasks.resource('r1')).token === null, 'expiry');
    release();
  });

  it("expiry alone does not stop the old holder's write: without a takeover it lands (fencing is not a deadline)", async () => {
    let unstick!: () => void;
    const stuck = new Promise<void>((resolve) => (unstick = resolve));
    const a = cluster.worker({ workerId: 'a', handler: async () => stuck.then(() => ({ by: 'a' })) });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: null });
    const grant = await a.next('granted');
    await cluster.expire(a);
    unstick();
    await a.writeHeld();
    expect(await cluster.results('r1')).toEqual([]);
    a.resume();
    const written = await a.next('written');
    expect(written).toMatchObject({ token: grant.token, outcome: 'written' });
    expect(await cluster.results('r1')).toEqual([expect.objectContaining({ workerId: 'a', token: grant.token })]);
  });

  it('holds a paused worker’s writes until it resumes, and lets them land first', async () => {
    let unstick!: () => void;
    const stuck = new Promise<void>((resolve) => (unstick = resolve));
    const w = cluster.worker({ workerId: 'w', handler: async () => stuck.then(() => 'result') });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: null });
    await w.next('granted');
    w.pause();
    unstick();
    await w.writeHeld();
    expect(w.paused).toBe(true);
    expect((await cluster.decisions('r1')).filter((d) => d.kind === 'write')).toEqual([]);
    w.resume();
    await w.next('completed');
    expect((await cluster.decisions('r1')).filter((d) => d.kind === 'write').map((d) => d.outcome)).toEqual([
      'written',
    ]);
  });

  it('a takeover moves the fence to the new token before the new holder runs', async () => {
    // A handler that runs until its lease is lost (it honours the signal).
    const untilLost = (_task: unknown, ctx: { signal: AbortSignal }) =>
      new Promise<never>((_resolve, reject) => {
        ctx.signal.addEventListener('abort', () => {
          reject(ctx.signal.reason as Error);
        });
      });
    const a = cluster.worker({ workerId: 'a', handler: untilLost });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: null });
    const first = await a.next('granted');
    const b = await cluster.takeOver(a, { workerId: 'b', handler: () => 'b' });
    expect(b.token).toBeGreaterThan(first.token);
    expect(await cluster.fence('r1')).toBe(b.token);
    await b.worker.next('completed');
  });

  it('backoffs run on the manual clock: a failed attempt is retried once time moves past it', async () => {
    await cluster.close();
    cluster = await TestCluster.start({ coordinator: { RETRY_INITIAL_MS: '60000' } });
    let calls = 0;
    const w = cluster.worker({
      workerId: 'w',
      handler: () => {
        calls += 1;
        if (calls === 1) throw new Error('first attempt fails');
        return 'second';
      },
    });
    await cluster.submit({ taskId: 't1', resource: 'r1', payload: null });
    const failed = await w.next('failed');
    expect(failed.outcome).toBe('retrying');
    expect((await cluster.task('t1'))?.state).toBe('delayed');
    await cluster.advance(60_000);
    await w.next('completed');
    expect(calls).toBe(2);
  });
});
