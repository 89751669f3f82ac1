/**
 * The design note's five cases, end to end: real etcd, a real sink, the coordinator (in-process,
 * and for case 5 the built process), and a raw WebSocket worker.
 *
 * (1) a renew at exactly the deadline is refused and never revives the lease;
 * (2) expired but not taken over: the old holder's write is accepted (default) / refused
 *     (fence-on-expiry);
 * (3) after a takeover the old holder's write is refused with STALE_TOKEN;
 * (4) replay of the same result is accepted, a conflicting one refused;
 * (5) coordinator restart (SIGKILL + start of dist/main.js): tokens keep growing, fences intact.
 */
import type { Grant } from '@leasehold/protocol';
import { ManualClock } from '@leasehold/testing/clock';
import { describe, expect, it } from 'vitest';
import { TestWorker, type AdminClient } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/coordinator-design-note/';
const TTL = 1_000;
const stack = useStack({ prefix: PREFIX, sessionTtlMs: TTL });

function asGrant(m: unknown): Grant {
  expect(m).toMatchObject({ type: 'lease.granted' });
  return m as Grant;
}

async function write(w: TestWorker, g: Grant, resultId: string, payload: unknown) {
  return stack.sinkClient.write({
    resource: g.resource,
    token: BigInt(g.token),
    resultId,
    workerId: w.welcome!.workerId,
    incarnation: w.welcome!.incarnation,
    capability: g.capability,
    payload: payload as never,
  });
}

async function fenceOf(resource: string): Promise<bigint> {
  return (await stack.sinkClient.getResource(resource)).fence;
}

async function setup(name: string, overrides: Record<string, string> = {}, clock?: ManualClock) {
  const c = await stack.coordinator(
    { LEASEHOLD_COORDINATOR_PREFIX: `${PREFIX}${name}/`, ...overrides },
    clock === undefined ? {} : { clock },
  );
  return { c, admin: stack.admin(c.url) };
}

describe('design note cases against real etcd and a real sink', () => {
  it('(1) a renew at exactly the deadline is refused, and nothing revives the lease', async () => {
    const clock = new ManualClock(1_000_000);
    const { c, admin } = await setup('case1', {}, clock);
    await admin.submit('t1', 'case1/r');
    const w = await stack.worker(c.url, 'w1');
    const g = asGrant(await w.acquire('q1'));

    clock.set(1_000_000 + TTL - 1);
    expect(await w.renew(g.resource, g.token)).toMatchObject({ type: 'lease.renewed', ttlMs: TTL });
    const deadline = 1_000_000 + TTL - 1 + TTL;

    clock.set(deadline);
    expect(await w.renew(g.resource, g.token)).toMatchObject({ type: 'error', code: 'LEASE_EXPIRED' });
    expect(await w.heartbeat()).toMatchObject({ type: 'error', code: 'SESSION_EXPIRED' });
    clock.advance(1);
    expect(await w.renew(g.resource, g.token)).toMatchObject({ type: 'error', code: 'LEASE_EXPIRED' });

    // The coordinator ends the session in etcd: owner key gone, the worker told.
    expect(await w.push('session.expired', 5_000)).toMatchObject({ sessionId: w.sessionId, reason: 'deadline' });
    expect((await admin.resource('case1/r')).body).toMatchObject({ owner: null, token: null });
    expect(await w.renew(g.resource, g.token)).toMatchObject({ type: 'error', code: 'LEASE_EXPIRED' });
    w.close();
  });

  it('(2a) expired but not taken over: the old holder can still write (default mode)', async () => {
    const { c, admin } = await setup('case2a');
    await admin.submit('t2a', 'case2a/r');
    const w = await stack.worker(c.url, 'w2a');
    const g = asGrant(await w.acquire('q1'));
    expect(await fenceOf(g.resource)).toBe(BigInt(g.token));
    // The worker goes silent; the coordinator judges the session expired.
    await w.push('session.expired', 5_000);
    expect((await admin.resource(g.resource)).body).toMatchObject({ owner: null });
    expect(await fenceOf(g.resource)).toBe(BigInt(g.token));
    expect(await write(w, g, 'r-2a', { v: 1 })).toMatchObject({ ok: true, outcome: 'written' });
    w.close();
  });

  it('(2b) fence-on-expiry: the expired holder is refused even before anyone takes over', async () => {
    const { c, admin } = await setup('case2b', { LEASEHOLD_COORDINATOR_FENCE_ON_EXPIRY: 'true' });
    await admin.submit('t2b', 'case2b/r');
    const w = await stack.worker(c.url, 'w2b');
    const g = asGrant(await w.acquire('q1'));
    await w.push('session.expired', 5_000);
    const fence = await waitFor('fence advanced on expiry', async () => {
      const f = await fenceOf(g.resource);
      return f > BigInt(g.token) ? f : undefined;
    });
    expect(await write(w, g, 'r-2b', { v: 1 })).toEqual({ ok: false, code: 'STALE_TOKEN', fence });
    // Nobody took over: the task is pending again.
    expect((await admin.task('t2b')).body).toMatchObject({ state: 'pending', attempts: 1 });
    w.close();
  });

  let takeover: { old: TestWorker; oldGrant: Grant; next: TestWorker; nextGrant: Grant; admin: AdminClient };

  it('(3) after a takeover the old holder is refused with STALE_TOKEN', async () => {
    const { c, admin } = await setup('case3');
    await admin.submit('t3', 'case3/r', { job: 3 });
    const old = await stack.worker(c.url, 'w3-old');
    const oldGrant = asGrant(await old.acquire('q1'));
    await old.push('session.expired', 5_000);

    const next = await stack.worker(c.url, 'w3-new');
    const nextGrant = asGrant(await next.acquire('q1'));
    expect(nextGrant).toMatchObject({ taskId: 't3', resource: 'case3/r', attempt: 2, payload: { job: 3 } });
    expect(BigInt(nextGrant.token)).toBeGreaterThan(BigInt(oldGrant.token));
    expect(await fenceOf('case3/r')).toBe(BigInt(nextGrant.token));

    expect(await write(old, oldGrant, 'task:t3', { by: 'old' })).toEqual({
      ok: false,
      code: 'STALE_TOKEN',
      fence: BigInt(nextGrant.token),
    });
    expect(await write(next, nextGrant, 'task:t3', { by: 'new' })).toMatchObject({ ok: true, outcome: 'written' });
    takeover = { old, oldGrant, next, nextGrant, admin };
  });

  it('(4) replaying a result is accepted, a conflicting one refused; completion is idempotent', async () => {
    const { old, oldGrant, next, nextGrant, admin } = takeover;
    expect(await write(next, nextGrant, 'task:t3', { by: 'new' })).toMatchObject({ ok: true, outcome: 'replayed' });
    expect(await write(next, nextGrant, 'task:t3', { by: 'other' })).toMatchObject({
      ok: false,
      code: 'RESULT_CONFLICT',
    });
    // The old holder cannot complete; the new one can, twice (a retry after a lost reply).
    expect(await old.complete(oldGrant, 'task:t3')).toMatchObject({ type: 'error' });
    expect(await next.complete(nextGrant, 'task:t3')).toMatchObject({ type: 'task.completed', token: nextGrant.token });
    expect(await next.complete(nextGrant, 'task:t3')).toMatchObject({ type: 'task.completed', token: nextGrant.token });
    expect((await admin.task('t3')).body).toMatchObject({
      state: 'completed',
      attempts: 2,
      result: { resultId: 'task:t3', token: nextGrant.token },
    });
    // Submitting the same definition again is a replay; another definition a conflict.
    expect(await admin.submit('t3', 'case3/r', { job: 3 })).toMatchObject({
      status: 200,
      body: { state: 'completed' },
    });
    expect(await admin.submit('t3', 'case3/r', { job: 4 })).toMatchObject({ status: 409, body: { code: 'CONFLICT' } });
    old.close();
    next.close();
  });

  it('(5) coordinator restart (SIGKILL + start): sessions resume, tokens keep growing, fences intact', async () => {
    // The etcd lease outlives the session by ETCD_LEASE_MARGIN_MS (default max(TTL, 10 s)): 5 s
    // leaves a restart on a loaded machine time to adopt a's session, and keeps the wait for the
    // backstop that ends b's session below short.
    const svc = await stack.spawnCoordinator('case5', {
      LEASEHOLD_COORDINATOR_PREFIX: `${PREFIX}case5/`,
      LEASEHOLD_COORDINATOR_ETCD_LEASE_MARGIN_MS: '5000',
    });
    const admin = stack.admin(svc.url);
    await admin.submit('t5', 'case5/r');
    const a = await stack.worker(svc.url, 'w5-a');
    const first = asGrant(await a.acquire('q1'));

    await svc.kill();
    expect((await a.closed).code).toBe(1006);
    await svc.start();

    // The worker resumes its still-live session on the new process, which adopts it.
    const again = await TestWorker.connect(svc.url, stack.keys.workerKey);
    const welcome = await again.hello('w5-a', 'inc-1', a.sessionId);
    expect(welcome).toMatchObject({ resumed: true, sessionId: a.sessionId });
    expect(await again.renew(first.resource, first.token)).toMatchObject({ type: 'lease.renewed' });
    // The retried acquire returns the same grant, not a second one.
    expect(await again.acquire('q1')).toMatchObject({ type: 'lease.granted', token: first.token });

    // The worker goes silent; the restarted coordinator ends its session at the deadline.
    await again.push('session.expired', 5_000);
    const b = await stack.worker(svc.url, 'w5-b');
    const second = asGrant(await b.acquire('q1'));
    expect(BigInt(second.token)).toBeGreaterThan(BigInt(first.token));
    expect(await fenceOf('case5/r')).toBe(BigInt(second.token));
    expect(await write(again, first, 'task:t5', { by: 'a' })).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
    expect(await write(b, second, 'task:t5', { by: 'b' })).toMatchObject({ ok: true, outcome: 'written' });

    // Restart again: tokens still grow (they are etcd revisions, not a counter in the process).
    await svc.kill();
    await svc.start();
    await admin.submit('t5-more', 'case5/r');
    // b's session (served by the killed process) ends by the etcd lease backstop.
    await waitFor('b lost case5/r to the etcd lease backstop', async () =>
      (await admin.resourceView('case5/r')).owner === null ? true : undefined,
    );
    const c = await stack.worker(svc.url, 'w5-c');
    const third = asGrant(await c.acquire('q1'));
    expect(BigInt(third.token)).toBeGreaterThan(BigInt(second.token));
    expect(await fenceOf('case5/r')).toBe(BigInt(third.token));
    a.close();
    b.close();
    c.close();
  });
});
