import { DEFAULT_RETRY_POLICY, retryDelayMs, type RetryPolicy } from '@leasehold/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  abandoned,
  attemptFailed,
  cancelled,
  completed,
  endedBy,
  granted,
  lastEventOf,
  newTask,
  released,
  retried,
  viewState,
} from './lifecycle.js';
import type { TaskRecord } from './records.js';

const POLICY: RetryPolicy = {
  maxAttempts: 3,
  backoff: { initialMs: 1_000, multiplier: 2, maxMs: 3_000, jitter: 0 },
  nonRetryable: ['Fatal'],
};
const env = (nowMs: number, random = () => 0) => ({ nowMs, random, defaults: DEFAULT_RETRY_POLICY });
const BOOM = { name: 'Error', message: 'boom', retryable: true };
const HOLDER = { workerId: 'w1', sessionId: 's1' };

const PAYLOAD = { payloadBytes: 1, payloadDigest: 'd' };

function submitted(): TaskRecord {
  return newTask({ taskId: 't', resource: 'r', ...PAYLOAD, retry: POLICY }, env(0));
}

describe('task lifecycle (pure)', () => {
  it('fails after exactly maxAttempts failed attempts, backing off 1 s, 2 s (capped at 3 s) between them', () => {
    let task = submitted();
    const delays: number[] = [];
    const ended: [number, string, string][] = [];
    for (let n = 1; n <= 3; n += 1) {
      const now = 10_000 * n;
      expect(task.open).toBeUndefined();
      task = granted(task, HOLDER, now);
      expect(task).toMatchObject({ attempts: n, open: { attempt: n, workerId: 'w1', startedAtMs: now } });
      task = attemptFailed(task, BigInt(n), BOOM, 'failed', env(now));
      expect(task.endedAttempts).toBe(n);
      if (task.last !== undefined) ended.push([task.last.attempt, task.last.outcome, task.last.token]);
      if (task.state === 'pending') delays.push((task.notBeforeMs ?? 0) - now);
    }
    expect(delays).toEqual([1_000, 2_000]);
    expect(task).toMatchObject({ state: 'failed', attempts: 3, lastError: { name: 'Error' }, lastEvent: 'failed' });
    expect(ended).toEqual([
      [1, 'failed', '1'],
      [2, 'failed', '2'],
      [3, 'failed', '3'],
    ]);
  });

  it('a non-retryable error (flag or name) fails at once; a lost lease counts as an attempt', () => {
    const a = granted(submitted(), HOLDER, 0);
    expect(attemptFailed(a, 1n, { ...BOOM, retryable: false }, 'failed', env(0)).state).toBe('failed');
    expect(attemptFailed(a, 1n, { ...BOOM, name: 'Fatal' }, 'failed', env(0)).state).toBe('failed');
    const lost = attemptFailed(a, 1n, { ...BOOM, name: 'LeaseExpired' }, 'expired', env(0));
    expect(lost).toMatchObject({ state: 'pending', attempts: 1, lastEvent: 'expired' });
    expect(lost.notBeforeMs).toBeUndefined(); // a lost lease is retried at once
  });

  it('a release and an abandoned grant give their attempt back; an abandon backs off on its own count', () => {
    const a = granted(submitted(), HOLDER, 0);
    expect(released(a, 1n, 5)).toMatchObject({ attempts: 0, lastEvent: 'released' });
    expect(released(a, 1n, 5).open).toBeUndefined();
    const once = abandoned(a, 1n, 'sink down', env(0));
    expect(once).toMatchObject({ attempts: 0, deferrals: 1, notBeforeMs: 1_000 });
    const twice = abandoned(granted(once, HOLDER, 1_000), 2n, 'sink down', env(1_000));
    expect(twice).toMatchObject({ attempts: 0, deferrals: 2, notBeforeMs: 3_000 });
    // Completion clears the failure counts.
    expect(completed(granted(twice, HOLDER, 5_000), 3n, 'task:t', 5_000)).not.toHaveProperty('deferrals');
  });

  it('cancel closes the open attempt; retry starts a fresh budget and keeps the history', () => {
    const a = granted(submitted(), HOLDER, 0);
    const c = cancelled(a, 7n, 10);
    expect(c).toMatchObject({ state: 'cancelled', endedAtMs: 10 });
    expect(c.open).toBeUndefined();
    expect(c.last).toMatchObject({ outcome: 'cancelled', token: '7' });
    const failed = attemptFailed(a, 1n, { ...BOOM, retryable: false }, 'failed', env(0));
    const again = retried(failed, 20);
    expect(again).toMatchObject({
      state: 'pending',
      attempts: 0,
      lastEvent: 'retried',
      last: failed.last,
      endedAttempts: failed.endedAttempts,
    });
    expect(again.endedAtMs).toBeUndefined();
  });

  it('counts every ended attempt (the history sequence), the last one kept in the record', () => {
    let task: TaskRecord = { ...submitted(), retry: { ...POLICY, maxAttempts: 100 } };
    for (let n = 1; n <= 15; n += 1) task = released(granted(task, HOLDER, n), BigInt(n), n);
    expect(task.endedAttempts).toBe(15);
    expect(task.last?.token).toBe('15');
  });

  it('clips error texts by their encoded size (a record stays bounded)', () => {
    const huge = { name: 'E'.repeat(5_000), message: '\u0001'.repeat(5_000), retryable: true };
    const failed = attemptFailed(granted(submitted(), HOLDER, 0), 1n, huge, 'failed', env(0));
    expect(JSON.stringify(failed.lastError?.name).length).toBeLessThanOrEqual(1_024);
    expect(Buffer.byteLength(JSON.stringify(failed.lastError?.message))).toBeLessThanOrEqual(1_024);
    expect(failed.last?.error).toEqual(failed.lastError);
  });

  it('shows delayed while waiting and leased while held', () => {
    const t = { ...submitted(), notBeforeMs: 100 };
    expect(viewState(t, false, 99)).toBe('delayed');
    expect(viewState(t, false, 100)).toBe('pending');
    expect(viewState(t, true, 0)).toBe('leased');
  });

  it('newTask keeps a notBefore only when it is in the future, and the trace context only when given', () => {
    const at = (notBeforeMs: number | undefined, nowMs: number) =>
      newTask(
        { taskId: 't', resource: 'r', ...PAYLOAD, ...(notBeforeMs === undefined ? {} : { notBeforeMs }) },
        {
          nowMs,
          defaults: POLICY,
        },
      );
    expect(at(101, 100).notBeforeMs).toBe(101);
    expect(at(100, 100)).not.toHaveProperty('notBeforeMs');
    expect(at(99, 100)).not.toHaveProperty('notBeforeMs');
    expect(at(undefined, 100)).not.toHaveProperty('notBeforeMs');
    expect(at(undefined, 100)).not.toHaveProperty('traceparent');
    const tp = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect(newTask({ taskId: 't', resource: 'r', ...PAYLOAD, traceparent: tp }, env(0)).traceparent).toBe(tp);
    expect(newTask({ taskId: 't', resource: 'r', ...PAYLOAD }, env(0)).retry).toEqual(DEFAULT_RETRY_POLICY);
  });

  it('history entries carry the error, and never end before they started', () => {
    const a = granted(submitted(), HOLDER, 50);
    const failed = attemptFailed(a, 4n, BOOM, 'failed', env(40)); // a clock read earlier than the grant's
    expect(failed.last).toEqual({
      attempt: 1,
      workerId: 'w1',
      sessionId: 's1',
      token: '4',
      outcome: 'failed',
      error: { name: 'Error', message: 'boom' },
      startedAtMs: 50,
      endedAtMs: 50,
    });
    expect(released(a, 4n, 60).last).not.toHaveProperty('error');
    expect(released(a, 4n, 60).last?.endedAtMs).toBe(60);
    expect(abandoned(a, 4n, 'sink down', env(60)).last?.error).toEqual({
      name: 'SinkUnavailable',
      message: 'sink down',
    });
  });

  it('a release without an open attempt adds no history and never counts below zero', () => {
    const fresh = submitted();
    const r = released(fresh, 1n, 5);
    expect(r.attempts).toBe(0);
    expect(r.last).toBeUndefined();
    expect(r.endedAttempts).toBeUndefined();
  });

  it('cancel of a task nobody holds keeps its history as it was', () => {
    const a = released(granted(submitted(), HOLDER, 0), 1n, 1);
    const c = cancelled(a, undefined, 10);
    expect(c).toMatchObject({ state: 'cancelled', lastEvent: 'cancelled', endedAtMs: 10 });
    expect(c.last).toEqual(a.last);
    expect(c.endedAttempts).toBe(a.endedAttempts);
  });

  it('lastEventOf: the recorded event; for records of older coordinators, derived from state and attempts', () => {
    const base = submitted();
    expect(lastEventOf({ ...base, lastEvent: 'retried' })).toBe('retried');
    const { lastEvent: _drop, ...old } = base;
    expect(lastEventOf(old)).toBe('submitted');
    expect(lastEventOf({ ...old, attempts: 1 })).toBe('granted');
    expect(lastEventOf({ ...old, state: 'completed' })).toBe('completed');
    expect(lastEventOf({ ...old, state: 'failed', attempts: 0 })).toBe('failed');
  });

  it('backoff: never above the cap, never below (1 - jitter) of the raw delay', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60_000 }),
        fc.double({ min: 1, max: 10, noNaN: true }),
        fc.integer({ min: 0, max: 600_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        (initialMs, multiplier, cap, jitter, n, r) => {
          const maxMs = Math.max(cap, initialMs);
          const d = retryDelayMs({ initialMs, multiplier, maxMs, jitter }, n, () => r);
          const raw = Math.min(maxMs, initialMs * multiplier ** (n - 1));
          expect(d).toBeLessThanOrEqual(maxMs);
          expect(d).toBeGreaterThanOrEqual(Math.floor(raw * (1 - jitter)));
        },
      ),
    );
  });

  it('endedBy: the last attempt, its token and outcome, ended by this worker id in this session', () => {
    const done = completed(granted(submitted(), HOLDER, 5), 7n, 'task:t', 9);
    const failed = attemptFailed(granted(submitted(), HOLDER, 5), 7n, BOOM, 'failed', env(9));
    const { sessionId: _s, ...withoutSession } = done.last ?? { attempt: 0 };
    const old = { ...done, last: withoutSession as NonNullable<TaskRecord['last']> };
    const rows: [string, TaskRecord, string, 'completed' | 'failed', typeof HOLDER, boolean][] = [
      ['the holder, completed', done, '7', 'completed', HOLDER, true],
      ['the holder, failed', failed, '7', 'failed', HOLDER, true],
      ['another worker', done, '7', 'completed', { workerId: 'w2', sessionId: 's1' }, false],
      ['the same worker in another session', done, '7', 'completed', { workerId: 'w1', sessionId: 's2' }, false],
      ['another token', done, '8', 'completed', HOLDER, false],
      ['another outcome', done, '7', 'failed', HOLDER, false],
      ['an attempt recorded without its session (older coordinator)', old, '7', 'completed', HOLDER, false],
      ['no ended attempt', granted(submitted(), HOLDER, 5), '1', 'completed', HOLDER, false],
    ];
    for (const [name, task, token, outcome, holder, expected] of rows) {
      expect(endedBy(task, token, outcome, holder), name).toBe(expected);
    }
  });
});
