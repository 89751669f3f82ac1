/**
 * GrantService over the in-memory etcd, a manual clock and an in-memory fence: the grant order
 * (owner txn -> durable fence advance -> grant), idempotent acquires, and what a failed advance
 * leaves behind. Each test names the mechanism whose deletion makes it fail.
 */
import { describe, expect, it } from 'vitest';
import { eachServiceCluster, type ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;

eachServiceCluster((c, first) => {
  cluster = c;
  c1 = first;
});

describe('grant order', () => {
  it('sends no grant before the fence is advanced to its token (advance before grant)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    cluster.fence.hold();
    let answered = false;
    const reply = cluster.acquire(w).then((r) => {
      answered = true;
      return r;
    });
    await cluster.settle();
    // The owner key exists (step a), the advance is waiting (step b): no grant may be out yet.
    expect(cluster.owners().has('r1')).toBe(true);
    expect(cluster.fence.heldCount).toBe(1);
    expect(answered).toBe(false);
    cluster.fence.release();
    const token = tokenOf(await reply);
    expect(cluster.fence.fence('r1')).toBe(token);
    expect(cluster.owners().get('r1')).toBe(token);
    expect(cluster.fence.write('r1', token)).toBe('written');
  });

  it('the advance names its grant with the very capability the worker receives (what the sink is vouched)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1', 'inc-7');
    const reply = await cluster.acquire(w);
    if (reply.type !== 'lease.granted') throw new Error(`expected a grant, got ${reply.type}`);
    expect(cluster.fence.grants.get('r1')).toEqual({
      workerId: 'w1',
      incarnation: 'inc-7',
      capability: reply.capability,
    });
  });

  it('grants the fencing token the store allocated (the owner key create_revision), never a count of its own', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const w = await cluster.worker(c1, 'w1');
    const a = tokenOf(await cluster.acquire(w));
    const b = tokenOf(await cluster.acquire(w));
    expect(cluster.owners()).toEqual(
      new Map([
        ['r1', a],
        ['r2', b],
      ]),
    );
    expect(b).toBeGreaterThan(a);
  });

  it('abandons the grant when the advance is refused (the fence is past its token): no grant, no owner', async () => {
    await cluster.submit(c1, 't1', 'r1');
    cluster.fence.fences.set('r1', 1_000_000n); // the sink saw a later grant (e.g. a restored etcd)
    const w = await cluster.worker(c1, 'w1');
    const reply = await cluster.acquire(w);
    expect(reply.type).toBe('lease.none');
    expect(cluster.owners().has('r1')).toBe(false);
    expect(cluster.fence.fence('r1')).toBe(1_000_000n);
  });

  it('abandons the grant when the sink does not answer: an UNAVAILABLE error, no owner left behind', async () => {
    await cluster.submit(c1, 't1', 'r1');
    cluster.fence.down = true;
    const w = await cluster.worker(c1, 'w1');
    const reply = await cluster.acquire(w);
    expect(reply).toMatchObject({ type: 'error', code: 'UNAVAILABLE', retryable: true });
    expect(cluster.owners().has('r1')).toBe(false);
    cluster.fence.down = false;
    await cluster.settle(); // the index catches up with the abandon
    expect(tokenOf(await cluster.acquire(w))).toBeGreaterThan(0n);
  });
});

describe('idempotent acquire', () => {
  it('a retried request id gets the same grant back, not a second one (holding compare)', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const w = await cluster.worker(c1, 'w1');
    const first = await cluster.acquire(w, { requestId: 'req-1' });
    const retry = await cluster.acquire(w, { requestId: 'req-1' });
    expect(retry).toMatchObject({ type: 'lease.granted', resource: 'r1', token: tokenOf(first).toString() });
    expect(cluster.owners()).toEqual(new Map([['r1', tokenOf(first)]]));
  });

  it("a request id is the session's own: another session's copy is a new acquire", async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const a = await cluster.worker(c1, 'wa');
    const b = await cluster.worker(c1, 'wb');
    const first = await cluster.acquire(a, { requestId: 'same' });
    const other = await cluster.acquire(b, { requestId: 'same' });
    expect(other).toMatchObject({ type: 'lease.granted', resource: 'r2' });
    expect(tokenOf(other)).not.toBe(tokenOf(first));
  });

  it('answers lease.none when nothing is grantable, and grants a waiting long poll when a task arrives', async () => {
    const w = await cluster.worker(c1, 'w1');
    expect((await cluster.acquire(w)).type).toBe('lease.none');
    const waiting = cluster.acquire(w, { waitMs: 2_000 });
    await cluster.advance(500);
    await cluster.submit(c1, 't1', 'r1');
    expect(await waiting).toMatchObject({ type: 'lease.granted', resource: 'r1' });
  });

  it('a task that arrives while the acquire reads its recorded grant (before it waits) is granted at once', async () => {
    const w = await cluster.worker(c1, 'w1');
    // A resumed session reads (one opened here on its current connection does not: below).
    const resumed = await cluster.resume(w, c1);
    expect(resumed.opened.resumed).toBe(true);
    // Hold the acquire in its "was this request granted before?" read, as a slow etcd would.
    const read = c1.store.holding.bind(c1.store);
    let letGo: (() => void) | undefined;
    c1.store.holding = async (sessionId, requestId) => {
      const recorded = await read(sessionId, requestId);
      await new Promise<void>((resolve) => (letGo = resolve));
      return recorded;
    };
    let answered = false;
    const waiting = cluster.acquire(w, { waitMs: 5_000 }).then((r) => {
      answered = true;
      return r;
    });
    await cluster.settle();
    expect(letGo).toBeDefined();
    await cluster.submit(c1, 't1', 'r1'); // indexed and "woken" while no acquire waits
    letGo?.();
    await cluster.settle();
    expect(answered).toBe(true); // not after the 5 s long poll ran out
    expect(await waiting).toMatchObject({ type: 'lease.granted', resource: 'r1' });
  });

  it('an idle long poll of a session opened here costs no etcd read; a resumed one reads', async () => {
    const reads: string[] = [];
    const read = c1.store.holding.bind(c1.store);
    c1.store.holding = (sessionId, requestId) => {
      reads.push(`${c1.id}:${requestId}`);
      return read(sessionId, requestId);
    };
    const w = await cluster.worker(c1, 'w1');
    expect(await cluster.acquire(w, { requestId: 'idle-1' })).toMatchObject({ type: 'lease.none' });
    const polled = cluster.acquire(w, { requestId: 'idle-2', waitMs: 1_000 });
    await cluster.advance(1_000);
    expect(await polled).toMatchObject({ type: 'lease.none' });
    expect(reads).toEqual([]);
    await cluster.resume(w, c1);
    expect(await cluster.acquire(w, { requestId: 'idle-3' })).toMatchObject({ type: 'lease.none' });
    expect(reads).toEqual(['c1:idle-3']);
  });

  it('a retry on the same connection of a request granted before gets its grant back when nothing else is grantable', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const first = await cluster.acquire(w, { requestId: 'req-1' });
    expect(first).toMatchObject({ type: 'lease.granted', resource: 'r1' });
    // Its reply "lost" (the worker's wait timed out): the same request id again, r1 now owned.
    expect(await cluster.acquire(w, { requestId: 'req-1' })).toMatchObject({
      type: 'lease.granted',
      resource: 'r1',
      token: tokenOf(first).toString(),
    });
    expect(await cluster.acquire(w, { requestId: 'req-2' })).toMatchObject({ type: 'lease.none' });
  });

  it("a retry of a request whose grant txn's reply was lost (applied, outcome unknown) gets that grant back, not lease.none", async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    c1.backend.loseNextReply = true;
    expect(await cluster.acquire(w, { requestId: 'req-1' })).toMatchObject({ type: 'error', code: 'UNAVAILABLE' });
    await cluster.settle();
    const token = cluster.owners().get('r1');
    expect(token).toBeDefined(); // the txn was applied: r1 is held by this session, unknown to it
    // Nothing else is grantable: without a read of its holding, the retry would be told lease.none
    // and t1 would stay held for as long as the session lives.
    expect(await cluster.acquire(w, { requestId: 'req-1' })).toMatchObject({
      type: 'lease.granted',
      resource: 'r1',
      token: token?.toString(),
    });
  });

  it('a retry after the session moved to another coordinator gets its grant back when nothing else is grantable', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const first = await cluster.acquire(w, { requestId: 'req-1' });
    expect(first).toMatchObject({ type: 'lease.granted', resource: 'r1' });
    // The grant's reply was lost with the connection; the worker resumes on c2 and asks again.
    const c2 = await cluster.coordinator('c2');
    const moved = await cluster.resume(w, c2);
    expect(moved.opened.resumed).toBe(true);
    const retry = await c2.services.grants.acquire(
      moved.opened.session,
      { type: 'lease.acquire', id: 'm-retry', requestId: 'req-1' },
      cluster.clock.nowMs(),
    );
    expect(retry).toMatchObject({ type: 'lease.granted', resource: 'r1', token: tokenOf(first).toString() });
  });

  it('splits grant latency: the long poll counts as wait, the fence advance as work (grant_wait/grant_work)', async () => {
    const w = await cluster.worker(c1, 'w1');
    const waiting = cluster.acquire(w, { waitMs: 5_000 });
    await cluster.advance(1_500); // nothing grantable: the long poll waits
    cluster.fence.hold();
    await cluster.submit(c1, 't1', 'r1');
    await cluster.settle();
    await cluster.advance(300); // the advance at the sink takes 300 ms
    cluster.fence.release();
    expect(await waiting).toMatchObject({ type: 'lease.granted' });
    const sum = async (name: string) =>
      Number(/_sum (\S+)/.exec(await c1.services.metrics.registry.getSingleMetricAsString(name))?.[1]);
    expect(await sum('leasehold_coordinator_grant_wait_seconds')).toBeCloseTo(1.5, 1);
    expect(await sum('leasehold_coordinator_grant_work_seconds')).toBeCloseTo(0.3, 1);
  });

  it('ends a long poll with lease.none when its wait runs out', async () => {
    const w = await cluster.worker(c1, 'w1');
    let answered = false;
    const waiting = cluster.acquire(w, { waitMs: 1_000 }).then((r) => {
      answered = true;
      return r;
    });
    await cluster.advance(999);
    expect(answered).toBe(false);
    await cluster.advance(2);
    expect((await waiting).type).toBe('lease.none');
  });

  it("answers SESSION_EXPIRED, not lease.none, when the session's deadline passes during the long poll's select", async () => {
    const w = await cluster.worker(c1, 'w1');
    // The clock crosses the session's deadline (TTL 3 s) right after the first select, unseen by
    // the timers: the session is live at the loop's check and not live once nothing was found.
    cluster.jumpAfterSelects(c1, (n) => (n === 0 ? 3_001 : 0));
    const reply = cluster.acquire(w, { waitMs: 20_000 });
    await cluster.settle();
    expect(await reply).toMatchObject({ type: 'error', code: 'SESSION_EXPIRED' });
  });
});

describe('drain (a closing worker)', () => {
  it("answers the session's waiting long polls at once and lets none of its later acquires wait; others wait on", async () => {
    const closing = await cluster.worker(c1, 'w1');
    const other = await cluster.worker(c1, 'w2');
    const answered: string[] = [];
    const poll = (w: typeof closing, requestId: string) =>
      cluster.acquire(w, { waitMs: 5_000, requestId }).then((r) => {
        answered.push(requestId);
        return r;
      });
    const waiting = poll(closing, 'a');
    const others = poll(other, 'b');
    await cluster.advance(100);
    expect(answered).toEqual([]);
    c1.services.grants.drain(closing.session);
    await cluster.settle();
    expect(answered).toEqual(['a']);
    expect(await waiting).toMatchObject({ type: 'lease.none' });
    // A later acquire of the drained session answers at once, not after its 5 s.
    const later = poll(closing, 'c');
    await cluster.settle();
    expect(answered).toEqual(['a', 'c']);
    expect(await later).toMatchObject({ type: 'lease.none' });
    // The other session still waits, and a task is still granted to whoever asks.
    await cluster.submit(c1, 't1', 'r1');
    expect(await others).toMatchObject({ type: 'lease.granted', resource: 'r1' });
  });
});

describe('capacity', () => {
  it('keeps grants held plus acquires in flight within the capacity the hello declared; long polls count', async () => {
    for (const [id, r] of [
      ['t1', 'r1'],
      ['t2', 'r2'],
      ['t3', 'r3'],
    ] as const)
      await cluster.submit(c1, id, r);
    const w = await cluster.worker(c1, 'w1', 'inc-1', 2);
    const first = tokenOf(await cluster.acquire(w, { requestId: 'a' }));
    const waiting = cluster.acquire(w, { waitMs: 5_000, requestId: 'b' }); // grants t2 at once
    expect(await waiting).toMatchObject({ type: 'lease.granted' });
    const third = await cluster.acquire(w, { requestId: 'c' });
    expect(third).toMatchObject({ type: 'error', code: 'CAPACITY_EXCEEDED', retryable: true });
    expect(cluster.owners().size).toBe(2);
    // A retry of a request already granted is a replay, not a new grant: allowed at capacity.
    expect(await cluster.acquire(w, { requestId: 'a' })).toMatchObject({
      type: 'lease.granted',
      token: first.toString(),
    });
    // Releasing one makes room.
    expect(await cluster.release(w, 'r1', first)).toMatchObject({ type: 'lease.released' });
    await cluster.settle();
    expect(await cluster.acquire(w, { requestId: 'd' })).toMatchObject({ type: 'lease.granted' });
  });

  it('counts a waiting long poll against the capacity', async () => {
    const w = await cluster.worker(c1, 'w1', 'inc-1', 1);
    const waiting = cluster.acquire(w, { waitMs: 2_000, requestId: 'p1' });
    await cluster.settle();
    expect(await cluster.acquire(w, { waitMs: 2_000, requestId: 'p2' })).toMatchObject({ code: 'CAPACITY_EXCEEDED' });
    await cluster.advance(2_001);
    expect((await waiting).type).toBe('lease.none');
    expect((await cluster.acquire(w, { requestId: 'p3' })).type).toBe('lease.none');
  });
});
