/**
 * SessionManager and LeaseService over the in-memory etcd with a manual clock: expiry judged by the
 * coordinator's own clock, renew rules, the end of a session (owners deleted at one revision, the
 * worker told, the lease revoked), and what expiry does NOT do to the fence (design note case 2).
 */
import { formatToken } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { eachServiceCluster, ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;
const TTL = 3_000;

eachServiceCluster((c, first) => {
  cluster = c;
  c1 = first;
});

describe('expiry by the coordinator clock', () => {
  it('keeps a session alive with heartbeats before its deadline, and refuses one at the deadline', async () => {
    const w = await cluster.worker(c1, 'w1');
    await cluster.advance(TTL - 1);
    expect(cluster.heartbeat(w)).toMatchObject({ ok: true });
    await cluster.advance(TTL - 1);
    expect(cluster.heartbeat(w)).toMatchObject({ ok: true });
    const deadline = cluster.clock.nowMs() + TTL;
    expect(cluster.heartbeat(w, deadline)).toMatchObject({ ok: false });
  });

  it('ends a silent session at its deadline: owners deleted at one revision, worker told, lease revoked', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const w = await cluster.worker(c1, 'w1');
    const a = tokenOf(await cluster.acquire(w));
    const b = tokenOf(await cluster.acquire(w));
    const revisionBefore = cluster.etcd.revision;
    await cluster.advance(TTL - 1);
    expect(cluster.owners().size).toBe(2);
    await cluster.advance(1);
    expect(cluster.owners().size).toBe(0);
    // One txn deleted both owner keys and recorded both lost attempts (revision +1): no
    // settlement txn of its own, so the tasks are grantable again as soon as the end lands.
    expect(cluster.etcd.revision).toBe(revisionBefore + 1n);
    for (const taskId of ['t1', 't2']) {
      expect(c1.services.index.pendingTask(taskId)).toMatchObject({ open: false, modRevision: revisionBefore + 1n });
    }
    expect(cluster.etcd.get(cluster.keys.owner('r1'))).toBeUndefined();
    for (const taskId of ['t1', 't2']) {
      expect((await c1.services.tasks.get(taskId))?.history?.map((h) => h.outcome)).toEqual(['expired']);
    }
    expect(cluster.etcd.keys(cluster.keys.sessions)).toEqual([]);
    expect(cluster.etcd.leaseCount).toBe(0);
    expect(w.channel.pushes('lease.revoked').map((m) => [m.resource, m.token])).toEqual(
      expect.arrayContaining([
        ['r1', a.toString()],
        ['r2', b.toString()],
      ]),
    );
    expect(w.channel.pushes('session.expired')).toHaveLength(1);
    // Expiry judged here, not by etcd: the lease had seconds left when the session ended.
  });

  it('grants the task of an expired session to a waiting acquire without a watch event (the end records the lost attempt)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const a = await cluster.worker(c1, 'wa');
    const old = tokenOf(await cluster.acquire(a));
    await cluster.advance(TTL - 500);
    const b = await cluster.worker(c1, 'wb');
    let granted: unknown;
    void cluster.acquire(b, { waitMs: 10_000 }).then((reply) => (granted = reply));
    await cluster.settle();
    // Nothing this coordinator learns from the watch from here on: the end txn's reply must do.
    c1.backend.pauseWatch();
    await cluster.advance(500);
    expect(granted).toMatchObject({ type: 'lease.granted', taskId: 't1', resource: 'r1', attempt: 2 });
    expect(tokenOf(granted as never)).toBeGreaterThan(old);
    c1.backend.resumeWatch();
    await cluster.settle();
    expect((await c1.services.tasks.get('t1'))?.history?.map((h) => h.outcome)).toEqual(['expired']);
  });

  it("hands an expired session's task over while an ordinary fence advance is still in flight (its own group commit)", async () => {
    await cluster.submit(c1, 't1', 'r1');
    const a = await cluster.worker(c1, 'wa');
    const old = tokenOf(await cluster.acquire(a));
    await cluster.advance(TTL - 500);
    // An ordinary grant whose advance the sink does not answer yet.
    await cluster.submit(c1, 't2', 'r2');
    cluster.fence.hold();
    const c = await cluster.worker(c1, 'wc');
    let ordinary: unknown;
    void cluster.acquire(c).then((reply) => (ordinary = reply));
    await cluster.settle();
    expect(cluster.fence.heldCount).toBe(1);
    cluster.fence.holdCurrent();
    const b = await cluster.worker(c1, 'wb');
    let taken: unknown;
    void cluster.acquire(b, { waitMs: 10_000 }).then((reply) => (taken = reply));
    await cluster.settle();
    await cluster.advance(500);
    expect(taken).toMatchObject({ type: 'lease.granted', taskId: 't1', attempt: 2 });
    expect(tokenOf(taken as never)).toBeGreaterThan(old);
    expect(ordinary).toBeUndefined();
    cluster.fence.release();
    await cluster.settle();
    expect(ordinary).toMatchObject({ type: 'lease.granted', taskId: 't2' });
  });

  it("hands an expired session's task over while an ordinary etcd request is still in flight (its end and grant are urgent)", async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const a = await cluster.worker(c1, 'wa');
    const old = tokenOf(await cluster.acquire(a));
    await cluster.advance(TTL - 500);
    const b = await cluster.worker(c1, 'wb');
    const c = await cluster.worker(c1, 'wc');
    // An ordinary grant whose etcd request does not come back: write txns that are not urgent wait
    // behind it (one combined request in flight, ETCD_COMBINED_REQUESTS=1).
    c1.backend.holdNextTxns(1);
    let ordinary: unknown;
    void cluster.acquire(c).then((reply) => (ordinary = reply));
    await cluster.settle();
    expect(c1.backend.heldTxns).toBe(1);
    let taken: unknown;
    void cluster.acquire(b, { waitMs: 10_000 }).then((reply) => (taken = reply));
    await cluster.settle();
    await cluster.advance(500);
    expect(taken).toMatchObject({ type: 'lease.granted', taskId: 't1', attempt: 2 });
    expect(tokenOf(taken as never)).toBeGreaterThan(old);
    expect(ordinary).toBeUndefined();
    c1.backend.releaseHeld();
    await cluster.settle();
    expect(ordinary).toMatchObject({ type: 'lease.granted', taskId: 't2' });
  });

  it('does not move the fence at expiry (default): the old holder can still write until a takeover', async () => {
    const old = await holderPastExpiry(cluster, c1);
    expect(cluster.fence.fence('r1')).toBe(old);
    expect(cluster.fence.write('r1', old)).toBe('written');
    const b = await cluster.worker(c1, 'wb');
    const next = tokenOf(await cluster.acquire(b));
    expect(next).toBeGreaterThan(old);
    expect(cluster.fence.write('r1', old)).toBe('STALE_TOKEN');
    expect(cluster.fence.write('r1', next)).toBe('written');
  });

  it('moves the fence at expiry in fence-on-expiry mode: the old holder is refused before any takeover', async () => {
    const fenced = new ServiceCluster({ FENCE_ON_EXPIRY: 'true' });
    try {
      const c = await fenced.coordinator();
      const old = await holderPastExpiry(fenced, c);
      expect(fenced.fence.fence('r1')).toBeGreaterThan(old);
      expect(fenced.fence.write('r1', old)).toBe('STALE_TOKEN');
    } finally {
      await fenced.close();
    }
  });
});

/** r1 granted to worker wa, then the clock moved past its session's deadline: the token it held. */
async function holderPastExpiry(on: ServiceCluster, coordinator: TestCoordinator): Promise<bigint> {
  await on.submit(coordinator, 't1', 'r1');
  const a = await on.worker(coordinator, 'wa');
  const old = tokenOf(await on.acquire(a));
  await on.advance(TTL + 10);
  return old;
}

describe('renew', () => {
  it('renews only for the holder, with its token and incarnation, while the session lives', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const other = await cluster.worker(c1, 'w2');
    const token = tokenOf(await cluster.acquire(w));
    expect(await cluster.renew(w, 'r1', token)).toMatchObject({ type: 'lease.renewed' });
    expect(await cluster.renew(w, 'r1', token + 1n)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.renew(other, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    const wrongIncarnation = { ...w, incarnation: 'inc-other' };
    expect(await cluster.renew(wrongIncarnation, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
  });

  it('refuses a renew received exactly at the deadline, and nothing revives the lease after it', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    const deadline = cluster.clock.nowMs() + TTL;
    expect(await cluster.renew(w, 'r1', token, deadline)).toMatchObject({ code: 'LEASE_EXPIRED' });
    await cluster.advance(TTL);
    expect(await cluster.renew(w, 'r1', token)).toMatchObject({ code: 'LEASE_EXPIRED' });
    expect(cluster.heartbeat(w)).toMatchObject({ ok: false });
    expect(cluster.owners().has('r1')).toBe(false);
  });

  it('moves the deadline with a renew: a renewed holder outlives its first deadline', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    await cluster.advance(TTL - 100);
    expect(await cluster.renew(w, 'r1', token)).toMatchObject({ type: 'lease.renewed' });
    await cluster.advance(TTL - 100);
    expect(cluster.owners().get('r1')).toBe(token);
  });
});

describe('release and complete', () => {
  it('releases: the task is pending again and the next acquire gets a larger token', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const first = tokenOf(await cluster.acquire(w));
    expect(await cluster.release(w, 'r1', first)).toMatchObject({ type: 'lease.released' });
    expect(await cluster.release(w, 'r1', first)).toMatchObject({ code: 'NOT_HOLDER' });
    await cluster.settle();
    const second = await cluster.acquire(w);
    // A release gives its attempt back: the next grant is attempt 1 again.
    expect(second).toMatchObject({ type: 'lease.granted', taskId: 't1', attempt: 1 });
    expect(tokenOf(second)).toBeGreaterThan(first);
  });

  it('completes once; a retry after a lost reply is answered as done, a foreign token is refused', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const other = await cluster.worker(c1, 'w2');
    const token = tokenOf(await cluster.acquire(w));
    expect(await cluster.complete(other, 't1', 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await cluster.complete(w, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });
    expect(await cluster.complete(w, 't1', 'r1', token)).toMatchObject({ type: 'task.completed' });
    expect(await c1.services.tasks.get('t1')).toMatchObject({ state: 'completed' });
    await cluster.settle();
    expect((await cluster.acquire(w)).type).toBe('lease.none');
  });
});

describe('cancel', () => {
  it('cancels a held task: the owner key goes, the holder is told, and its late write is refused after the next grant', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    expect(await c1.services.tasks.cancel('t1')).toMatchObject({ ok: true, task: { state: 'cancelled' } });
    await cluster.settle();
    expect(w.channel.pushes('lease.revoked')).toEqual([
      { type: 'lease.revoked', resource: 'r1', token: formatToken(token), reason: 'cancelled' },
    ]);
    expect(await cluster.renew(w, 'r1', token)).toMatchObject({ code: 'NOT_HOLDER' });
    const b = await cluster.worker(c1, 'w2');
    const next = tokenOf(await cluster.acquire(b));
    expect(cluster.fence.write('r1', token)).toBe('STALE_TOKEN');
    expect(cluster.fence.write('r1', next)).toBe('written');
  });
});
