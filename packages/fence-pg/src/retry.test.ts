import { backoffDelayMs } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { LeaseholdBackoff, transactionRetryPolicy } from './retry.js';

/** An error as node-postgres makes it: a SQLSTATE, and for a constraint its schema and name. */
const pgError = (code: string, extra: Record<string, string> = {}) =>
  Object.assign(new Error(code), { code, ...extra });
const BACKOFF = { initialMs: 4, maxMs: 16 } as const;

/** Runs `failures` (then success) through a policy; what was attempted and waited. */
async function runThrough(failures: readonly Error[], maxAttempts: number) {
  const policy = transactionRetryPolicy({ maxAttempts, backoff: BACKOFF, random: () => 0.5 });
  const delays: number[] = [];
  policy.onRetry((r) => delays.push(r.delay));
  let calls = 0;
  const outcome = await policy
    .execute(() => {
      const failure = failures[calls++];
      if (failure !== undefined) throw failure;
      return 'done';
    })
    .catch((err: unknown) => err);
  return { outcome, calls, delays };
}

describe('transactionRetryPolicy', () => {
  it.each([
    ['40001 serialization_failure', pgError('40001')],
    ['40P01 deadlock_detected', pgError('40P01')],
    ['23505 on leasehold.results_pkey', pgError('23505', { schema: 'leasehold', constraint: 'results_pkey' })],
  ])('runs the transaction again after %s', async (_name, err) => {
    const { outcome, calls } = await runThrough([err, err], 5);
    expect([outcome, calls]).toEqual(['done', 3]);
  });

  it.each([
    ['23505 on a table of the user', pgError('23505', { schema: 'public', constraint: 'accounts_pkey' })],
    ['55P03 lock_not_available', pgError('55P03')],
    ['57014 statement timeout', pgError('57014')],
    ['a connection error', pgError('ECONNRESET')],
    ['the caller’s own error', new Error('boom')],
  ])('gives up at once on %s', async (_name, err) => {
    const { outcome, calls } = await runThrough([err], 5);
    expect([outcome, calls]).toEqual([err, 1]);
  });

  it('makes maxAttempts attempts in all, the first included, then throws the last error', async () => {
    const errors = [1, 2, 3, 4].map(() => pgError('40001'));
    const { outcome, calls } = await runThrough(errors, 3);
    expect([outcome, calls]).toEqual([errors[2], 3]);
    expect((await runThrough(errors, 1)).calls).toBe(1);
    expect((await runThrough(errors, 0)).calls).toBe(1);
  });

  it('waits backoffDelayMs at the 0-based retry number between attempts', async () => {
    const { delays } = await runThrough(
      [1, 2, 3, 4].map(() => pgError('40P01')),
      5,
    );
    expect(delays).toEqual([0, 1, 2, 3].map((n) => backoffDelayMs(n, BACKOFF, () => 0.5)));
    expect(delays).toEqual([2, 4, 8, 8]);
  });
});

describe('LeaseholdBackoff', () => {
  it('is backoffDelayMs(attempt − 1) with the injected randomness, attempt after attempt', () => {
    const backoff = new LeaseholdBackoff({ initialMs: 10, maxMs: 100 }, () => 0);
    const signal = new AbortController().signal;
    const ctx = (attempt: number) => ({ attempt, signal, result: { error: new Error('x') } });
    const first = backoff.next(ctx(1));
    const second = first.next(ctx(2));
    const fifth = second.next(ctx(3)).next(ctx(4)).next(ctx(5));
    expect([first.duration, second.duration, fifth.duration]).toEqual([10, 20, 100]);
  });
});
