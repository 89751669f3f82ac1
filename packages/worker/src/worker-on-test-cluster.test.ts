/**
 * The SDK on `@leasehold/testing`'s in-process cluster (the real coordinator on the in-memory etcd,
 * the in-memory sink, manual time): what a handler sees and what its outcomes do, with no etcd
 * binary and no sockets — the same cluster a user tests their handler on.
 */
import { TestCluster } from '@leasehold/testing';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { NonRetryableError } from './errors.js';
import type { GrantProof } from './types.js';

let cluster: TestCluster;
beforeEach(async () => {
  cluster = await TestCluster.start();
});
afterEach(async () => {
  await cluster.close();
});

it("hands the handler the grant's proof: this worker, its token, a capability, the attempt", async () => {
  const seen: GrantProof[] = [];
  const w = cluster.worker({
    workerId: 'proof',
    handler: (_task, ctx) => {
      seen.push(ctx.grant);
      return { ok: true };
    },
  });
  await cluster.submit({ taskId: 'p-1', resource: 'proofs/1', payload: {} });
  const granted = await w.next('granted');
  await w.next('completed');
  expect(seen).toHaveLength(1);
  expect(seen[0]).toMatchObject({ resource: 'proofs/1', token: granted.token, workerId: 'proof', attempt: 1 });
  expect(seen[0]?.capability.length).toBeGreaterThan(0);
  // The fence moved to the token before the handler ran, and the result is stored under it.
  expect(await cluster.fence('proofs/1')).toBe(granted.token);
  expect(await cluster.results('proofs/1')).toEqual([expect.objectContaining({ token: granted.token })]);
  expect((await cluster.task('p-1'))?.result).toEqual({ resultId: 'task:p-1', token: granted.token.toString() });
});

it('a side-effect-only handler (returns nothing) completes the task with no sink write', async () => {
  const w = cluster.worker({ workerId: 'side', handler: () => undefined });
  await cluster.submit({ taskId: 's-1', resource: 'side/1', payload: {} });
  const done = await w.next('completed');
  expect(done).toMatchObject({ taskId: 's-1', withResult: false });
  // The task says so: readers (waitForResult) do not look for a result at the sink.
  expect(await cluster.task('s-1')).toMatchObject({ state: 'completed', result: { noResult: true } });
  expect(await cluster.results('side/1')).toEqual([]);
});

it('a NonRetryableError fails the task at once; a thrown error is retried after its backoff', async () => {
  let calls = 0;
  const w = cluster.worker({
    workerId: 'fails',
    handler: (task) => {
      if (task.taskId === 'fatal') throw new NonRetryableError('bad input');
      calls += 1;
      if (calls === 1) throw new Error('flaky');
      return { calls };
    },
  });
  await cluster.submit({ taskId: 'fatal', resource: 'f/1', payload: {} });
  expect(await w.next('failed')).toMatchObject({ taskId: 'fatal', outcome: 'failed' });
  await cluster.submit({ taskId: 'flaky', resource: 'f/2', payload: {} });
  expect(await w.next('failed', (e) => e.taskId === 'flaky')).toMatchObject({ outcome: 'retrying' });
  // Nothing happens until the backoff has passed on the cluster's clock.
  await cluster.advance(60_000);
  await w.next('completed', (e) => e.taskId === 'flaky');
  expect((await cluster.task('flaky'))?.attempts).toBe(2);
});
