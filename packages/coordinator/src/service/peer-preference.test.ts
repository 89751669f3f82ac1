/**
 * Coordinators sharing the work (core/peers.ts wired through the watch feed and the grant
 * service): with workers on two coordinators, each grants from the resources assigned to it
 * instead of both racing for the oldest task; a coordinator started later learns its peers from
 * the sessions in etcd; alone, a coordinator grants oldest first as before.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CoordinatorPeers } from '../core/peers.js';
import { ServiceCluster } from '../testing/service-harness.js';

let cluster: ServiceCluster;
beforeEach(() => {
  cluster = new ServiceCluster();
});
afterEach(async () => {
  await cluster.close();
});

const RESOURCES = Array.from({ length: 16 }, (_, i) => `r${i}`);

/** The resources of RESOURCES assigned to `id` among `members`, in order. */
function assigned(members: string[], id: string): string[] {
  const peers = new CoordinatorPeers();
  peers.reset(members.map((m, i) => [`s${i}`, m]));
  return RESOURCES.filter((r) => peers.assignee(r) === id);
}

function resourceOf(reply: unknown): string | undefined {
  const r = reply as { type?: string; resource?: string };
  return r.type === 'lease.granted' ? r.resource : undefined;
}

describe('coordinators share the pending tasks', () => {
  it('with workers on two coordinators, each grants the oldest task assigned to it', async () => {
    const c1 = await cluster.coordinator('c1');
    const c2 = await cluster.coordinator('c2');
    for (const [i, r] of RESOURCES.entries()) await cluster.submit(c1, `t${i}`, r);
    const a = await cluster.worker(c1, 'wa');
    const b = await cluster.worker(c2, 'wb');
    await cluster.settle();
    const mine1 = assigned(['c1', 'c2'], 'c1');
    const mine2 = assigned(['c1', 'c2'], 'c2');
    // The table must test something: the oldest task is not assigned to both.
    expect(mine1[0]).toBeDefined();
    expect(mine2[0]).toBeDefined();
    const [fromA, fromB] = await Promise.all([cluster.acquire(a), cluster.acquire(b)]);
    expect(resourceOf(fromA)).toBe(mine1[0]);
    expect(resourceOf(fromB)).toBe(mine2[0]);
  });

  it('a coordinator started after the sessions opened learns its peers from the snapshot', async () => {
    const c1 = await cluster.coordinator('c1');
    await cluster.worker(c1, 'wa');
    // The oldest tasks are c1's: c3 must skip them to take its own.
    const mine = assigned(['c1', 'c3'], 'c3');
    const order = [...assigned(['c1', 'c3'], 'c1'), ...mine];
    expect(mine[0]).toBeDefined();
    for (const [i, r] of order.entries()) await cluster.submit(c1, `t${i}`, r);
    const c3 = await cluster.coordinator('c3'); // its index is built from etcd now
    const w = await cluster.worker(c3, 'wc');
    await cluster.settle();
    expect(resourceOf(await cluster.acquire(w))).toBe(mine[0]);
  });

  it('alone, a coordinator grants oldest first', async () => {
    const c1 = await cluster.coordinator('c1');
    for (const [i, r] of RESOURCES.entries()) await cluster.submit(c1, `t${i}`, r);
    const a = await cluster.worker(c1, 'wa');
    const granted: (string | undefined)[] = [];
    for (let i = 0; i < 3; i += 1) granted.push(resourceOf(await cluster.acquire(a)));
    expect(granted).toEqual(['r0', 'r1', 'r2']);
  });
});
