/**
 * Selection that prefers the resources assigned to this coordinator (core/peers.ts): within a
 * priority, the oldest grantable task of a preferred resource among the first PREFER_WINDOW
 * grantable ones, else what the plain select takes. Priority order and a resource's own order
 * are kept.
 */
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { entryOf, PREFER_WINDOW, TaskIndex, type TaskEntry } from './task-index.js';
import type { TaskRecord } from './task-record.js';

interface Spec {
  readonly id: string;
  readonly resource: string;
  readonly priority?: number;
  readonly queue?: string;
}

function indexOf(specs: readonly Spec[]): TaskIndex {
  const entries: TaskEntry[] = specs.map((s, i) => {
    const record: TaskRecord = {
      v: 2,
      taskId: s.id,
      resource: s.resource,
      ...(s.queue === undefined ? {} : { queue: s.queue }),
      payloadBytes: 4,
      payloadDigest: 'd',
      state: 'pending',
      attempts: 0,
      priority: s.priority ?? 0,
    };
    const rev = BigInt(10 + i);
    return entryOf(
      { record, value: JSON.stringify(record), createRevision: rev, modRevision: rev },
      DEFAULT_RETRY_POLICY,
    );
  });
  const index = new TaskIndex();
  index.reset(entries, [], BigInt(10 + specs.length));
  return index;
}

const mine =
  (...resources: string[]) =>
  (resource: string) =>
    resources.includes(resource);
const pick = (index: TaskIndex, prefer: (r: string) => boolean, extra: object = {}) =>
  index.select({ prefer, ...extra }).map((t) => t.taskId);

describe('TaskIndex select with prefer', () => {
  const three = [
    { id: 't1', resource: 'r1' },
    { id: 't2', resource: 'r2' },
    { id: 't3', resource: 'r3' },
  ];

  it('takes the oldest task of a preferred resource, not the oldest task', () => {
    expect(pick(indexOf(three), mine('r2', 'r3'))).toEqual(['t2']);
    expect(
      indexOf(three)
        .select()
        .map((t) => t.taskId),
    ).toEqual(['t1']);
  });

  it('with no preferred resource among them, takes what the plain select takes', () => {
    expect(pick(indexOf(three), mine('elsewhere'))).toEqual(['t1']);
  });

  it('looks at most PREFER_WINDOW grantable tasks: a preferred one further back waits', () => {
    const others = Array.from({ length: PREFER_WINDOW }, (_, i) => ({ id: `o${i}`, resource: `x${i}` }));
    expect(pick(indexOf([...others, { id: 'late', resource: 'r' }]), mine('r'))).toEqual(['o0']);
    const fewer = others.slice(1);
    expect(pick(indexOf([...fewer, { id: 'late', resource: 'r' }]), mine('r'))).toEqual(['late']);
  });

  it('keeps priority order: a higher priority beats a preferred resource', () => {
    const index = indexOf([
      { id: 'low-mine', resource: 'r1', priority: 0 },
      { id: 'high-theirs', resource: 'r2', priority: 5 },
    ]);
    expect(pick(index, mine('r1'))).toEqual(['high-theirs']);
  });

  it('keeps a resource its own order, and skips held resources', () => {
    const index = indexOf([
      { id: 'a', resource: 'x' },
      { id: 'first-on-r', resource: 'r' },
      { id: 'second-on-r', resource: 'r' },
      { id: 'on-s', resource: 's' },
    ]);
    expect(pick(index, mine('r', 's'))).toEqual(['first-on-r']);
    index.hold('r');
    expect(pick(index, mine('r', 's'))).toEqual(['on-s']);
    index.hold('s');
    expect(pick(index, mine('r', 's'))).toEqual(['a']);
  });

  it('the queues keep their turns for the fallback, and the window spans them', () => {
    const index = indexOf([
      { id: 'a1', resource: 'ra1', queue: 'alpha' },
      { id: 'b1', resource: 'rb1', queue: 'beta' },
      { id: 'b2', resource: 'rb2', queue: 'beta' },
    ]);
    const queues = ['alpha', 'beta'];
    expect(pick(index, mine('none'), { queues, turn: 1 })).toEqual(['b1']);
    expect(pick(index, mine('rb2'), { queues, turn: 0 })).toEqual(['b2']);
  });

  it('is ignored for a select of more than one task', () => {
    expect(pick(indexOf(three), mine('r3'), { limit: 2 })).toEqual(['t1', 't2']);
  });
});
