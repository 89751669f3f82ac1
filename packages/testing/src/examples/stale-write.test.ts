import { TestCluster } from '@leasehold/testing';
import { afterEach, beforeEach, expect, it } from 'vitest';

let cluster: TestCluster;
beforeEach(async () => {
  cluster = await TestCluster.start();
});
afterEach(async () => {
  await cluster.close();
});

it("refuses my handler's stale write after another worker took the task over", async () => {
  // Worker A's handler computes a total, but gets stuck before returning it.
  let unstick!: () => void;
  const stuck = new Promise<void>((resolve) => (unstick = resolve));
  const a = cluster.worker({
    workerId: 'a',
    handler: async () => {
      await stuck;
      return { total: 1, by: 'a' };
    },
  });
  await cluster.submit({ taskId: 'invoice-7', resource: 'invoices/7', payload: { n: 1 } });
  const first = await a.next('granted');

  // A stops (a long GC pause, SIGSTOP): its lease expires and worker B takes the task over.
  const b = await cluster.takeOver(a, { workerId: 'b', handler: () => ({ total: 1, by: 'b' }) });
  await b.worker.next('completed');
  expect(b.token).toBeGreaterThan(first.token);

  // A wakes up and writes its result under its old token: the sink refuses it.
  unstick();
  await a.writeHeld();
  a.resume();
  const refused = await a.next('refused');
  expect(refused).toMatchObject({ code: 'STALE_TOKEN', token: first.token });

  // Only B's result is stored.
  expect(await cluster.results('invoices/7')).toEqual([
    expect.objectContaining({ workerId: 'b', token: b.token, payload: { total: 1, by: 'b' } }),
  ]);
});
