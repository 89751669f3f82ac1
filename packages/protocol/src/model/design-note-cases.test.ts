/**
 * The design note's five cases, on the pure model with a controllable clock.
 * Each is named after the case it proves; docs/guarantees.md links here.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '@leasehold/testing/clock';
import { FencedStore } from './fenced-store.js';
import { LeaseTable } from './lease-table.js';
import { SequenceAllocator } from './token-allocator.js';

const TTL = 1_000;
const A = { workerId: 'worker-a', incarnation: 'a1' };
const B = { workerId: 'worker-b', incarnation: 'b1' };

function setup(opts: { fenceOnExpiry?: boolean } = {}) {
  const clock = new ManualClock(10_000);
  const store = new FencedStore();
  const allocator = new SequenceAllocator();
  const table = new LeaseTable({ clock, allocator, fences: store, ttlMs: TTL, ...opts });
  return { clock, store, allocator, table };
}

function granted<T extends { ok: boolean }>(result: T): Extract<T, { ok: true }> {
  if (!result.ok)
    throw new Error(
      `expected success, got ${JSON.stringify(result, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`,
    );
  return result as Extract<T, { ok: true }>;
}

describe('design note case 1: renew at the TTL boundary', () => {
  it('accepts a renew 1 ms before the deadline and refuses one exactly at the deadline', () => {
    const { clock, table } = setup();
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    clock.advance(TTL - 1);
    const renewed = granted(table.renew({ resource: 'r', token: lease.token, ...A }));
    expect(renewed.lease.deadlineMs).toBe(clock.nowMs() + TTL);
    clock.set(renewed.lease.deadlineMs);
    expect(table.renew({ resource: 'r', token: lease.token, ...A })).toEqual({ ok: false, code: 'LEASE_EXPIRED' });
  });

  it('never revives an expired lease, however often renew is retried', () => {
    const { clock, table } = setup();
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    clock.advance(TTL + 5);
    for (let i = 0; i < 3; i++) {
      expect(table.renew({ resource: 'r', token: lease.token, ...A }).ok).toBe(false);
      clock.advance(1);
    }
    expect(table.holderOf('r')).toBeUndefined();
  });

  it('refuses a renew with the right token but another incarnation, or the right owner but another token', () => {
    const { table } = setup();
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    expect(table.renew({ resource: 'r', token: lease.token, ...A, incarnation: 'a2' })).toEqual({
      ok: false,
      code: 'NOT_HOLDER',
    });
    expect(table.renew({ resource: 'r', token: lease.token + 1n, ...A })).toEqual({ ok: false, code: 'NOT_HOLDER' });
  });
});

describe('design note case 2: expired but not yet taken over', () => {
  it("still accepts the old holder's write: expiry alone does not move the fence (default mode)", () => {
    const { clock, store, table } = setup();
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    clock.advance(TTL * 3);
    table.expire();
    expect(table.holderOf('r')).toBeUndefined();
    expect(store.fenceOf('r')).toBe(lease.token);
    expect(store.write('r', lease.token, 'task-1', { v: 'from A' })).toMatchObject({ ok: true, outcome: 'written' });
  });

  it('refuses it in fence-on-expiry mode, before anyone takes over', () => {
    const { clock, store, table } = setup({ fenceOnExpiry: true });
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    clock.advance(TTL);
    const [expired] = table.expire();
    expect(expired?.fencedTo).toBeGreaterThan(lease.token);
    expect(store.write('r', lease.token, 'task-1', { v: 'from A' })).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
  });
});

describe('design note case 3: takeover with the fence advanced first', () => {
  it("refuses the old holder's write after B took over, and B's write stands", () => {
    const { clock, store, table } = setup();
    const a = granted(table.acquire({ resource: 'r', requestId: 'qa', ...A })).lease;
    // A pauses past its lease; B acquires. The fence moves before B learns its token.
    clock.advance(TTL);
    const b = granted(table.acquire({ resource: 'r', requestId: 'qb', ...B })).lease;
    expect(b.token).toBeGreaterThan(a.token);
    expect(store.fenceOf('r')).toBe(b.token);
    // A wakes up and submits its old result.
    expect(store.write('r', a.token, 'task-1', { v: 'from A' })).toEqual({
      ok: false,
      code: 'STALE_TOKEN',
      fence: b.token,
    });
    expect(store.write('r', b.token, 'task-1', { v: 'from B' })).toMatchObject({ ok: true, outcome: 'written' });
    expect(store.resultOf('r', 'task-1')?.payload).toBe('{"v":"from B"}');
  });

  it('refuses acquire while the lease is valid', () => {
    const { clock, table } = setup();
    granted(table.acquire({ resource: 'r', requestId: 'qa', ...A }));
    clock.advance(TTL - 1);
    expect(table.acquire({ resource: 'r', requestId: 'qb', ...B })).toMatchObject({
      ok: false,
      code: 'LEASE_HELD',
      remainingMs: 1,
    });
  });

  it('refuses a worker-supplied bigger number that no grant advanced to', () => {
    const { store, table } = setup();
    const a = granted(table.acquire({ resource: 'r', requestId: 'qa', ...A })).lease;
    expect(store.write('r', a.token + 100n, 'task-1', 'x')).toMatchObject({ ok: false, code: 'FENCE_CONFLICT' });
  });

  it('returns the recorded grant for a retried acquire request id, never a second one', () => {
    const { table, allocator } = setup();
    const first = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    const again = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    expect(again.replayed).toBe(true);
    expect(again.lease).toEqual(first.lease);
    expect(allocator.last).toBe(first.lease.token);
  });
});

describe('design note case 4: replay and conflict', () => {
  it('accepts the same result id with the same payload as a replay and refuses a different payload', () => {
    const { store, table } = setup();
    const { lease } = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    expect(store.write('r', lease.token, 'task-1', { a: 1, b: 2 })).toMatchObject({ ok: true, outcome: 'written' });
    // Same payload, other key order: same canonical form.
    expect(store.write('r', lease.token, 'task-1', { b: 2, a: 1 })).toMatchObject({ ok: true, outcome: 'replayed' });
    expect(store.write('r', lease.token, 'task-1', { a: 1, b: 3 })).toMatchObject({
      ok: false,
      code: 'RESULT_CONFLICT',
    });
    expect(store.resultOf('r', 'task-1')?.payload).toBe('{"a":1,"b":2}');
  });

  it('keeps fences per resource: a takeover of one resource leaves the other writable', () => {
    const { clock, store, table } = setup();
    const r1 = granted(table.acquire({ resource: 'r1', requestId: 'q1', ...A })).lease;
    clock.advance(TTL);
    granted(table.acquire({ resource: 'r2', requestId: 'q2', ...B }));
    clock.advance(TTL);
    // r2 changes hands (its fence moves); r1's holder expired but nobody took r1 over.
    granted(table.acquire({ resource: 'r2', requestId: 'q3', ...A, incarnation: 'a-other' }));
    expect(store.fenceOf('r1')).toBe(r1.token);
    expect(store.write('r1', r1.token, 'task-1', 'ok')).toMatchObject({ ok: true });
  });
});

describe('design note case 5: a restarted lease table keeps the fence', () => {
  it('continues tokens from the durable allocator and refuses the pre-restart holder', () => {
    const { clock, store, allocator, table } = setup();
    const before = granted(table.acquire({ resource: 'r', requestId: 'q1', ...A })).lease;
    // "Restart": a brand-new lease table (its in-memory state gone) over the same store and allocator.
    const restarted = new LeaseTable({ clock, allocator, fences: store, ttlMs: TTL });
    const after = granted(restarted.acquire({ resource: 'r', requestId: 'q2', ...B })).lease;
    expect(after.token).toBeGreaterThan(before.token);
    expect(store.write('r', before.token, 'task-1', 'stale')).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
  });

  it('cannot grant from an in-memory counter that restarted at zero: the fence refuses it', () => {
    const { clock, store, table } = setup();
    granted(table.acquire({ resource: 'r', requestId: 'q1', ...A }));
    clock.advance(TTL);
    granted(table.acquire({ resource: 'r', requestId: 'q2', ...A, incarnation: 'x' }));
    clock.advance(TTL);
    const naive = new LeaseTable({ clock, allocator: new SequenceAllocator(), fences: store, ttlMs: TTL });
    expect(naive.acquire({ resource: 'r', requestId: 'q3', ...B })).toMatchObject({ ok: false, code: 'STALE_TOKEN' });
  });
});
