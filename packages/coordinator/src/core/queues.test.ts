import { describe, expect, it } from 'vitest';
import { acquireQueues, OTHER_QUEUES_LABEL, queueLabelRows, sessionQueues, wakesFor } from './queues.js';

describe('sessionQueues', () => {
  it.each([
    { hello: undefined, want: ['default'] },
    { hello: [], want: ['default'] },
    { hello: ['a'], want: ['a'] },
    { hello: ['b', 'a', 'b'], want: ['b', 'a'] },
  ])('hello queues $hello serve $want', ({ hello, want }) => {
    expect(sessionQueues(hello)).toEqual(want);
  });
});

describe('acquireQueues', () => {
  it.each([
    { session: ['a', 'b'], asked: undefined, want: { ok: true, queues: ['a', 'b'] } },
    { session: ['a', 'b'], asked: ['b'], want: { ok: true, queues: ['b'] } },
    { session: ['a', 'b'], asked: ['b', 'b'], want: { ok: true, queues: ['b'] } },
    { session: ['default'], asked: ['a'], want: { ok: false } },
    { session: ['a'], asked: ['a', 'z'], want: { ok: false } },
  ])('session $session, acquire $asked', ({ session, asked, want }) => {
    expect(acquireQueues(session, asked)).toMatchObject(want);
  });
});

describe('wakesFor', () => {
  it.each([
    { queues: ['a'], readied: 'all' as const, want: true },
    { queues: ['a'], readied: new Set(['a']), want: true },
    { queues: ['a', 'b'], readied: new Set(['b']), want: true },
    { queues: ['a'], readied: new Set(['b']), want: false },
    { queues: ['a'], readied: new Set<string>(), want: false },
  ])('$queues for $readied: $want', ({ queues, readied, want }) => {
    expect(wakesFor(queues, readied)).toBe(want);
  });
});

describe('queueLabelRows', () => {
  const c = (n: number) => ({ pending: n, failed: 0 });
  it('keeps default and the first queues by name, adds up the rest under (other)', () => {
    const counts = new Map([
      ['zeta', c(1)],
      ['alpha', c(2)],
      ['default', c(3)],
      ['beta', c(4)],
      ['omega', c(5)],
    ]);
    expect(Object.fromEntries(queueLabelRows(counts, 3))).toEqual({
      default: c(3),
      alpha: c(2),
      beta: c(4),
      [OTHER_QUEUES_LABEL]: c(6),
    });
  });

  it('has at most maxLabels + 1 rows however many queues there are', () => {
    const counts = new Map(Array.from({ length: 500 }, (_, i) => [`q${i}`, c(1)] as const));
    const rows = queueLabelRows(counts, 32);
    expect(rows.size).toBe(33);
    expect(rows.get(OTHER_QUEUES_LABEL)?.pending).toBe(468);
  });
});
