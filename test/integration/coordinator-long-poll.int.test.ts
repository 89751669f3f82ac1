/**
 * Long-poll acquire (`lease.acquire {waitMs}`) and the end of a session from the watch-fed index.
 *
 * - nothing grantable: the acquire is held and answered as soon as a task is submitted, or a holder
 *   releases, or a holder's session ends at its deadline (the takeover path);
 * - the wait is bounded: `lease.none` when it runs out; the waiting session's own end answers it;
 * - the expired holder is told (`lease.revoked`, `session.expired`) and its owner keys are gone.
 */
import type { Coordinator } from '@leasehold/coordinator';
import type { Grant } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { etcdSnapshot } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/coordinator-long-poll/';
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 1_000 });

const prefixOf = (name: string) => `${PREFIX}${name}/`;

/** Until `count` long-poll acquires are parked on `c` (its `leasehold_coordinator_acquires_waiting`). */
async function parked(c: Coordinator, count: number): Promise<void> {
  await waitFor(`${count} parked acquire(s)`, async () => {
    const gauge = await c.metrics.acquiresWaiting.get();
    return gauge.values[0]?.value === count ? true : undefined;
  });
}

describe('long-poll acquire', () => {
  it('is answered as soon as a task is submitted', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('submit') });
    const w = await stack.worker(c.url, 'w1');
    const started = performance.now();
    const waiting = w.request({ type: 'lease.acquire', requestId: 'q1', waitMs: 10_000 }, 15_000);
    await parked(c, 1); // found nothing: the submit below must wake it
    await stack.admin(c.url).submit('t1', 'submit/r1');
    expect(await waiting).toMatchObject({ type: 'lease.granted', taskId: 't1', resource: 'submit/r1' });
    expect(performance.now() - started).toBeLessThan(5_000);
    await parked(c, 0);
    w.close();
  });

  it('is answered when the holder releases the resource', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('release') });
    await stack.admin(c.url).submit('t1', 'release/r1');
    const holder = await stack.worker(c.url, 'w1');
    const taker = await stack.worker(c.url, 'w2');
    const held = (await holder.acquire('q1')) as Grant;
    expect(held.type).toBe('lease.granted');
    const waiting = taker.request({ type: 'lease.acquire', requestId: 'q1', taskId: 't1', waitMs: 10_000 }, 15_000);
    await parked(c, 1); // t1 is held: the release below must wake it
    expect(await holder.release(held.resource, held.token)).toMatchObject({ type: 'lease.released' });
    const grant = (await waiting) as Grant;
    expect(grant).toMatchObject({ type: 'lease.granted', taskId: 't1' });
    expect(BigInt(grant.token)).toBeGreaterThan(BigInt(held.token));
    holder.close();
    taker.close();
  });

  it("is answered when the holder's session ends at its deadline; the holder is told", async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('expiry') });
    await stack.admin(c.url).submit('t1', 'expiry/r1');
    await stack.admin(c.url).submit('t2', 'expiry/r2');
    const holder = await stack.worker(c.url, 'w1');
    const taker = await stack.worker(c.url, 'w2');
    const held = [(await holder.acquire('q1')) as Grant, (await holder.acquire('q2')) as Grant];
    expect(held.map((g) => g.type)).toEqual(['lease.granted', 'lease.granted']);
    const first = held[0]!;
    // The holder goes silent; the taker keeps its own session alive while it waits.
    const beat = setInterval(() => void taker.heartbeat().catch(() => undefined), 200);
    try {
      const waiting = taker.request(
        { type: 'lease.acquire', requestId: 'q1', taskId: first.taskId, waitMs: 10_000 },
        15_000,
      );
      const grant = (await waiting) as Grant;
      expect(grant).toMatchObject({ type: 'lease.granted', taskId: first.taskId, resource: first.resource });
      expect(BigInt(grant.token)).toBeGreaterThan(BigInt(first.token));
      expect(await holder.push('session.expired', 5_000)).toMatchObject({ reason: 'deadline' });
      const revoked = holder.received.filter((m) => m.type === 'lease.revoked');
      expect(revoked).toEqual(
        held.map((g) => ({ type: 'lease.revoked', resource: g.resource, token: g.token, reason: 'session-expired' })),
      );
      const owners = await etcdSnapshot(stack.etcd.endpoints, `${prefixOf('expiry')}owners/`);
      expect(Object.keys(owners)).toEqual([`${prefixOf('expiry')}owners/${first.resource}`]);
      const holdings = await etcdSnapshot(stack.etcd.endpoints, `${prefixOf('expiry')}holdings/${holder.sessionId}/`);
      expect(holdings).toEqual({});
    } finally {
      clearInterval(beat);
      holder.close();
      taker.close();
    }
  });

  it('answers lease.none when the wait runs out, and SESSION_EXPIRED when its own session ends', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('bounded') });
    const w = await stack.worker(c.url, 'w1');
    const started = performance.now();
    expect(await w.request({ type: 'lease.acquire', requestId: 'q1', waitMs: 300 })).toMatchObject({
      type: 'lease.none',
    });
    expect(performance.now() - started).toBeGreaterThanOrEqual(250);
    // No heartbeats: the session ends (TTL 1 s) long before the wait would.
    const reply = await w.request({ type: 'lease.acquire', requestId: 'q2', waitMs: 20_000 }, 10_000);
    expect(reply).toMatchObject({ type: 'error', code: 'SESSION_EXPIRED' });
    expect(performance.now() - started).toBeLessThan(5_000);
    w.close();
  });

  it('session.drain (a closing worker) answers its waiting acquires at once, and later ones do not wait', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('drain') });
    const closing = await stack.worker(c.url, 'w1');
    const other = await stack.worker(c.url, 'w2');
    expect(closing.welcome?.features).toContain('session.drain');
    const sessionId = closing.welcome?.sessionId ?? '';
    const started = performance.now();
    const waiting = closing.request({ type: 'lease.acquire', requestId: 'q1', waitMs: 20_000 }, 25_000);
    const others = other.request({ type: 'lease.acquire', requestId: 'q1', waitMs: 20_000 }, 25_000);
    await parked(c, 2);
    expect(await closing.request({ type: 'session.drain', sessionId })).toMatchObject({
      type: 'session.draining',
      sessionId,
    });
    expect(await waiting).toMatchObject({ type: 'lease.none', requestId: 'q1' });
    await parked(c, 1); // the other session's long poll still waits
    expect(await closing.request({ type: 'lease.acquire', requestId: 'q2', waitMs: 20_000 }, 25_000)).toMatchObject({
      type: 'lease.none',
    });
    expect(performance.now() - started).toBeLessThan(10_000);
    // Draining refuses no work: a grantable task is still granted to it.
    await stack.admin(c.url).submit('t1', 'drain/r1');
    expect(await others).toMatchObject({ type: 'lease.granted', taskId: 't1' });
    await stack.admin(c.url).submit('t2', 'drain/r2');
    expect(await closing.request({ type: 'lease.acquire', requestId: 'q3', waitMs: 20_000 }, 25_000)).toMatchObject({
      type: 'lease.granted',
      taskId: 't2',
    });
    // Only its own session: another's id is refused.
    expect(await other.request({ type: 'session.drain', sessionId })).toMatchObject({
      type: 'error',
      code: 'SESSION_EXPIRED',
    });
    closing.close();
    other.close();
  });
});
