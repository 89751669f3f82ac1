/** The index's owners and holds (core/index-owners.ts), without the index around them. */
import { describe, expect, it } from 'vitest';
import { OwnerTable, type OwnerEntry } from './index-owners.js';

const owner = (resource: string, sessionId: string, token = 1n): OwnerEntry => ({
  resource,
  taskId: `t-${resource}`,
  sessionId,
  requestId: `q-${resource}`,
  token,
});

describe('holds (a grant in flight keeps its resource from being selected again)', () => {
  it('a hold until a revision the index has already seen ends at once', () => {
    const t = new OwnerTable();
    t.hold('r');
    expect(t.holdUntil('r', 5n, 5n)).toBe(true);
    expect(t.isHeld('r', 5n)).toBe(false);
    expect(t.heldCount).toBe(0);
  });

  it('a hold until a later revision lasts until the index reaches it', () => {
    const t = new OwnerTable();
    t.hold('r');
    expect(t.holdUntil('r', 9n, 5n)).toBe(false);
    expect(t.isHeld('r', 8n)).toBe(true);
    expect(t.isHeld('r', 9n)).toBe(false);
    expect(t.heldCount).toBe(0);
  });

  it('seen(revision) ends the holds it passed and names their resources', () => {
    const t = new OwnerTable();
    t.hold('a');
    t.hold('b');
    t.holdUntil('a', 7n, 1n);
    t.holdUntil('b', 9n, 1n);
    expect(t.seen(8n)).toEqual(['a']);
    expect(t.isHeld('b', 8n)).toBe(true);
  });

  it('a hold without an end lasts', () => {
    const t = new OwnerTable();
    t.hold('r');
    expect(t.isHeld('r', 1_000n)).toBe(true);
    expect(t.seen(1_000n)).toEqual([]);
  });
});

describe('owners by session', () => {
  it('a resource that changes hands leaves the old session’s list', () => {
    const t = new OwnerTable();
    t.set(owner('r', 's1'));
    t.set(owner('r', 's2', 2n));
    expect(t.ofSession('s1')).toEqual([]);
    expect(t.ofSession('s2').map((o) => o.token)).toEqual([2n]);
  });

  it('an owner freed ahead of the watch is still the previous one until the watch passes it', () => {
    const t = new OwnerTable();
    const o = owner('r', 's1');
    t.set(o);
    t.delete('r');
    t.freedEarly(o, 4n);
    expect(t.previous('r')).toEqual(o);
    t.seen(4n);
    expect(t.previous('r')).toBeUndefined();
  });
});
