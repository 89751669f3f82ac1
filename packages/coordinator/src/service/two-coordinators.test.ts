/**
 * Deterministic interleavings of two coordinators on one store: a stale index, a coordinator that
 * lost its session to a peer, a coordinator paused between its grant txn and its fence advance.
 * Each of these is guarded by one compare or one ordering; each test fails when it is deleted:
 *
 * | test                                           | mechanism                                   |
 * | ---------------------------------------------- | ------------------------------------------- |
 * | stale index targets a task of an owned resource| grantOwners: owners/<r> absent              |
 * | both grant the same task at once               | grantOwners: tasks/<t> mod_revision         |
 * | a coordinator that lost the session to a peer  | grantOwners: sessions/<sid> mod_revision    |
 * | paused mid-grant, resumed after a takeover     | advance before grant; fence only grows      |
 * | adoption from a stale read                     | adoptSession: sessions/<sid> mod_revision   |
 * | end of a session a peer adopted                | endSession: sessions/<sid> mod_revision     |
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ServiceCluster, tokenOf, type TestCoordinator } from '../testing/service-harness.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;
let c2: TestCoordinator;
const TTL = 3_000;

beforeEach(async () => {
  cluster = new ServiceCluster();
  c1 = await cluster.coordinator('c1');
  c2 = await cluster.coordinator('c2');
});
afterEach(async () => {
  await cluster.close();
});

describe('two coordinators, one resource', () => {
  it('a coordinator with a stale index cannot grant a second task of a resource the peer owns', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r1');
    const a = await cluster.worker(c1, 'wa');
    const b = await cluster.worker(c2, 'wb');
    c2.backend.pauseWatch(); // c2's index will not see c1's grant
    const first = tokenOf(await cluster.acquire(a, { taskId: 't1' }));
    await cluster.settle();
    // c2 still believes r1 is free; t2 is unchanged since submit, so only owners/r1 absent can stop it.
    const second = await cluster.acquire(b, { taskId: 't2' });
    expect(second.type).not.toBe('lease.granted');
    expect(cluster.owners()).toEqual(new Map([['r1', first]]));
    c2.backend.resumeWatch();
  });

  it('both grant the same task in the same turn: exactly one owner, one grant', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const a = await cluster.worker(c1, 'wa');
    const b = await cluster.worker(c2, 'wb');
    const replies = await Promise.all([cluster.acquire(a), cluster.acquire(b)]);
    const granted = replies.filter((r) => r.type === 'lease.granted');
    expect(granted).toHaveLength(1);
    expect(cluster.owners().size).toBe(1);
    expect(cluster.fence.log.filter((e) => e.kind === 'advance' && e.outcome === 'advanced')).toHaveLength(1);
  });

  it('a coordinator that lost a session to its peer cannot grant for it any more', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    c1.backend.pauseWatch(); // c1 will not hear that the session moved
    const { opened } = await cluster.resume(w, c2);
    expect(opened.resumed).toBe(true);
    // c1 still thinks it serves the session: its grant txn compares the session key it wrote.
    const stale = await cluster.acquire(w); // w.coordinator is still c1
    expect(stale).toMatchObject({ type: 'error', code: 'SESSION_EXPIRED' });
    expect(cluster.owners().size).toBe(0);
    c1.backend.resumeWatch();
    await cluster.settle();
    // On the peer, the same session gets its grant.
    const moved = { ...w, session: opened.session, coordinator: c2 };
    expect((await cluster.acquire(moved)).type).toBe('lease.granted');
  });

  it('a coordinator paused between its grant txn and its advance never delivers once a peer took over', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const a = await cluster.worker(c1, 'wa');
    cluster.fence.hold(); // c1 "pauses" after its owner txn, before the advance reaches the sink
    let delivered: unknown;
    const late = cluster.acquire(a).then((r) => {
      delivered = r;
      return r;
    });
    await cluster.settle();
    const staleToken = cluster.owners().get('r1');
    expect(staleToken).toBeDefined();
    // c1's session ends (its worker is silent and c1 is stuck), the owner key goes; c2 grants anew.
    c1.backend.down = true;
    await cluster.advance(TTL + 2_000);
    c1.backend.down = false;
    // c1 handed its session off while cut off; nobody resumed it: the etcd lease backstop
    // (session TTL + the margin, 10 s by default) ends it.
    await cluster.advance(10_000);
    expect(cluster.owners().size).toBe(0);
    const b = await cluster.worker(c2, 'wb');
    const grantB = cluster.acquire(b);
    await cluster.settle();
    cluster.fence.release(); // both advances arrive: c2's (newer) first or not, c1's must not win
    const tokenB = tokenOf(await grantB);
    const reply = await late;
    expect(delivered).toBeDefined();
    expect(reply.type).not.toBe('lease.granted');
    expect(tokenB).toBeGreaterThan(staleToken ?? 0n);
    expect(cluster.fence.fence('r1')).toBe(tokenB);
    expect(cluster.fence.write('r1', staleToken ?? 0n)).toBe('STALE_TOKEN');
  });

  it('adopts a session once: a second coordinator adopting from the same read gets nothing', async () => {
    const w = await cluster.worker(c1, 'w1');
    const read = await c2.store.session(w.session.sessionId);
    if (read === undefined) throw new Error('no session');
    const c3 = await cluster.coordinator('c3');
    const { opened } = await cluster.resume(w, c3);
    expect(opened.resumed).toBe(true);
    expect(await c2.store.adoptSession(read, { ...read.record, coordinatorId: 'c2' })).toEqual({ kind: 'raced' });
    expect((await c2.store.session(w.session.sessionId))?.record.coordinatorId).toBe('c3');
  });

  it('does not end a session at its old deadline on a coordinator that lost it to a peer', async () => {
    await cluster.submit(c1, 't1', 'r1');
    const w = await cluster.worker(c1, 'w1');
    const token = tokenOf(await cluster.acquire(w));
    c1.backend.pauseWatch(); // c1 misses the adoption and keeps its own deadline timer
    const { opened } = await cluster.resume(w, c2);
    const moved = { ...w, session: opened.session, coordinator: c2 };
    await cluster.advance(TTL - 500);
    expect(cluster.heartbeat(moved)).toMatchObject({ ok: true }); // kept alive on c2
    await cluster.advance(1_000); // c1's deadline for the session passes: its end txn must fail
    expect(cluster.owners().get('r1')).toBe(token);
    expect(await cluster.renew(moved, 'r1', token)).toMatchObject({ type: 'lease.renewed' });
    c1.backend.resumeWatch();
  });
});

describe('a coordinator cut off from etcd', () => {
  it('hands its sessions to a peer (sockets closed with 1001), refuses hellos, and the session survives the move', async () => {
    const cut = new ServiceCluster({ SESSION_TTL_MS: '4000', ETCD_GIVE_UP_MS: '1000' });
    try {
      const a = await cut.coordinator('a');
      const b = await cut.coordinator('b');
      await cut.submit(a, 't1', 'r1');
      const w = await cut.worker(a, 'w1');
      const token = tokenOf(await cut.acquire(w));
      a.backend.down = true;
      await cut.advance(999);
      expect(w.channel.closed).toBeUndefined();
      await cut.advance(300);
      expect(w.channel.closed).toMatchObject({ code: 1001 });
      await expect(cut.worker(a, 'w2')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      // The worker resumes on the peer: same session, still the holder, its lease renews there.
      const moved = await cut.resume(w, b);
      expect(moved.opened).toMatchObject({ resumed: true, session: { sessionId: w.session.sessionId } });
      w.session = moved.opened.session;
      w.coordinator = b;
      expect(cut.owners().get('r1')).toBe(token);
      expect(await cut.renew(w, 'r1', token)).toMatchObject({ type: 'lease.renewed' });
      // etcd answers again: the coordinator takes hellos again.
      a.backend.down = false;
      // etcd answers again: the health flag clears. The probe in flight when etcd came back retries
      // on real time (readPolicy's backoff), the next ones tick on the manual clock: the wait moves
      // both and ends when the flag is seen clear (bounded; no fixed pause of its own).
      await vi.waitFor(
        async () => {
          await cut.advance(300);
          expect(a.services.state.etcdUnreachable).toBe(false);
        },
        { timeout: 5_000, interval: 10 },
      );
      expect((await cut.worker(a, 'w3')).session.sessionId).toBeDefined();
    } finally {
      await cut.close();
    }
  });
});

describe('a coordinator whose etcd answers with refusals (NOSPACE, permission denied)', () => {
  it('is not cut off: refusals are answers, so no session is handed off', async () => {
    const refused = new ServiceCluster({ SESSION_TTL_MS: '4000', ETCD_GIVE_UP_MS: '1000' });
    try {
      const a = await refused.coordinator('a');
      const w = await refused.worker(a, 'w1');
      a.backend.refuseAll = 'permission-denied';
      await refused.advance(2_500); // well past ETCD_GIVE_UP_MS, every probe refused
      expect(a.services.state.etcdUnreachable).toBe(false);
      expect(w.channel.closed).toBeUndefined();
      a.backend.refuseAll = undefined;
    } finally {
      await refused.close();
    }
  });
});

describe('a coordinator that was paused (its clock jumps) while etcd is fine', () => {
  it('asks etcd once more before giving its sessions away', async () => {
    const paused = new ServiceCluster({ SESSION_TTL_MS: '4000', ETCD_GIVE_UP_MS: '1000' });
    try {
      const a = await paused.coordinator('a');
      const w = await paused.worker(a, 'w1');
      paused.clock.advance(2_500); // SIGSTOP / long GC: no timer ran, no probe was sent
      await paused.advance(600); // the next probe ticks with 3 s of silence behind it
      expect(a.services.state.etcdUnreachable).toBe(false);
      expect(w.channel.closed).toBeUndefined();
      expect(paused.heartbeat(w)).toMatchObject({ ok: true });
    } finally {
      await paused.close();
    }
  });
});
