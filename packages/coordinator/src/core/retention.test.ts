import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planRetention, type RetentionPolicy } from './retention.js';
import type { EndedTask } from './task-index.js';

const NOW = 1_000_000;
const OFF = { maxAgeMs: null, maxCount: null };
const policy = (over: Partial<RetentionPolicy> = {}): RetentionPolicy => ({
  completed: OFF,
  failed: OFF,
  cancelled: OFF,
  maxBytes: null,
  minAgeMs: 0,
  ...over,
});
const ended = (taskId: string, state: EndedTask['state'], agoMs: number, over: Partial<EndedTask> = {}): EndedTask => ({
  taskId,
  state,
  queue: 'default',
  endedAtMs: NOW - agoMs,
  modRevision: BigInt(taskId.length + 10),
  payloadBytes: 100,
  keep: undefined,
  ...over,
});
const plan = (tasks: EndedTask[], p: RetentionPolicy, limit = 100) =>
  planRetention(tasks, p, NOW, limit).map((r) => `${r.taskId}:${r.reason}`);

describe('planRetention', () => {
  it.each<[string, EndedTask[], RetentionPolicy, string[]]>([
    ['nothing configured: nothing removed', [ended('a', 'completed', 5_000)], policy(), []],
    [
      'age: at the maximum age and past it, not before',
      [ended('a', 'completed', 999), ended('b', 'completed', 1_000), ended('c', 'completed', 5_000)],
      policy({ completed: { maxAgeMs: 1_000, maxCount: null } }),
      ['c:age', 'b:age'],
    ],
    [
      'age is per state',
      [ended('a', 'completed', 5_000), ended('b', 'failed', 5_000), ended('c', 'cancelled', 5_000)],
      policy({ failed: { maxAgeMs: 1_000, maxCount: null } }),
      ['b:age'],
    ],
    [
      'count: the newest N stay, older ones go, oldest first',
      [ended('a', 'failed', 30), ended('b', 'failed', 10), ended('c', 'failed', 20), ended('d', 'failed', 40)],
      policy({ failed: { maxAgeMs: null, maxCount: 2 } }),
      ['d:count', 'a:count'],
    ],
    [
      'count 0 keeps none; the minimum age protects the young',
      [ended('a', 'cancelled', 500), ended('b', 'cancelled', 5_000)],
      policy({ cancelled: { maxAgeMs: null, maxCount: 0 }, minAgeMs: 1_000 }),
      ['b:count'],
    ],
    [
      "a task's own age replaces the state's, and keeps it out of the count",
      [
        ended('own-short', 'completed', 100, { keep: 50 }),
        ended('own-long', 'completed', 5_000, { keep: 10_000 }),
        ended('own-forever', 'completed', 9_000, { keep: null }),
        ended('plain', 'completed', 200),
      ],
      policy({ completed: { maxAgeMs: 1_000, maxCount: 0 } }),
      ['plain:count', 'own-short:age'],
    ],
    [
      'bytes: the oldest go until the rest fit, own rules included',
      [
        ended('a', 'completed', 10, { payloadBytes: 400 }),
        ended('b', 'failed', 20, { payloadBytes: 400, keep: null }),
        ended('c', 'cancelled', 30, { payloadBytes: 400 }),
      ],
      policy({ maxBytes: 800 }),
      ['c:bytes'],
    ],
  ])('%s', (_name, tasks, p, want) => {
    expect(plan(tasks, p)).toEqual(want);
  });

  it('returns at most `limit`, oldest first, with the revision the index saw', () => {
    const tasks = Array.from({ length: 10 }, (_, i) => ended(`t${i}`, 'completed', 10_000 + i));
    const out = planRetention(tasks, policy({ completed: { maxAgeMs: 0, maxCount: null } }), NOW, 3);
    expect(out).toEqual([
      { taskId: 't9', modRevision: 12n, state: 'completed', reason: 'age' },
      { taskId: 't8', modRevision: 12n, state: 'completed', reason: 'age' },
      { taskId: 't7', modRevision: 12n, state: 'completed', reason: 'age' },
    ]);
  });

  it('property: what stays obeys every limit (counts, ages, bytes), and nothing is removed twice', () => {
    const task = fc.record({
      state: fc.constantFrom('completed' as const, 'failed' as const, 'cancelled' as const),
      agoMs: fc.integer({ min: 0, max: 10_000 }),
      payloadBytes: fc.integer({ min: 0, max: 1_000 }),
      keep: fc.option(fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: null }), { nil: undefined }),
    });
    const rule = fc.record({
      maxAgeMs: fc.option(fc.integer({ min: 0, max: 10_000 }), { nil: null }),
      maxCount: fc.option(fc.integer({ min: 0, max: 10 }), { nil: null }),
    });
    fc.assert(
      fc.property(
        fc.array(task, { maxLength: 40 }),
        rule,
        rule,
        rule,
        fc.option(fc.integer({ min: 0, max: 20_000 }), { nil: null }),
        fc.integer({ min: 0, max: 5_000 }),
        (specs, completed, failed, cancelled, maxBytes, minAgeMs) => {
          const p = policy({ completed, failed, cancelled, maxBytes, minAgeMs });
          const tasks = specs.map((t, i) =>
            ended(`t${i}`, t.state, t.agoMs, { payloadBytes: t.payloadBytes, keep: t.keep }),
          );
          const removed = planRetention(tasks, p, NOW, 1_000);
          const gone = new Set(removed.map((r) => r.taskId));
          expect(gone.size).toBe(removed.length);
          const left = tasks.filter((t) => !gone.has(t.taskId));
          for (const t of left) {
            const maxAge = t.keep !== undefined ? t.keep : p[t.state].maxAgeMs;
            if (maxAge !== null) expect(NOW - t.endedAtMs).toBeLessThan(maxAge);
          }
          for (const state of ['completed', 'failed', 'cancelled'] as const) {
            const max = p[state].maxCount;
            const counted = left.filter((t) => t.state === state && t.keep === undefined);
            const old = counted.filter((t) => NOW - t.endedAtMs >= minAgeMs);
            if (max !== null) expect(old.length <= max || counted.length <= max).toBe(true);
          }
          if (maxBytes !== null) expect(left.reduce((n, t) => n + t.payloadBytes, 0)).toBeLessThanOrEqual(maxBytes);
        },
      ),
      { numRuns: 300 },
    );
  });
});
