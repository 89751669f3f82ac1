import type { SinkEvent, TaskEvent } from '@leasehold/client';
import { DecisionOutcomeSchema, RefusalCodeSchema, RefusalRouteSchema } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { formatSinkEvent, formatTaskEvent } from './tail-format.js';

const AT = Date.UTC(2026, 11, 1, 10, 0, 0, 123);
const task = (over: Partial<TaskEvent>): TaskEvent => ({
  type: 'task',
  revision: '100',
  event: 'submitted',
  taskId: 't1',
  resource: 'acct/7',
  state: 'pending',
  attempts: 0,
  maxAttempts: 3,
  atMs: AT,
  ...over,
});
const decision = (over: Partial<Extract<SinkEvent, { type: 'decision' }>>): SinkEvent => ({
  type: 'decision',
  seq: 9,
  kind: 'write',
  resource: 'acct/7',
  token: '57',
  fenceBefore: '57',
  outcome: 'written',
  resultId: 'task:t1',
  workerId: 'w1',
  atMs: AT,
  ...over,
});

describe('tail lines: task events', () => {
  it.each<[string, Partial<TaskEvent>, string]>([
    ['submitted with a delay', { notBeforeMs: AT + 30_000 }, 'task submitted         t1 on acct/7 (runs in 30s)'],
    [
      'granted',
      { event: 'granted', state: 'leased', attempts: 1, token: '57', workerId: 'w1' },
      'task granted           t1 on acct/7 to w1, token 57 (attempt 1 of 3)',
    ],
    [
      'completed',
      { event: 'completed', state: 'completed', attempts: 1, result: { resultId: 'task:t1', token: '57' } },
      'task completed         t1 on acct/7: result task:t1 at token 57',
    ],
    [
      'retrying',
      {
        event: 'retrying',
        state: 'delayed',
        attempts: 1,
        workerId: 'w1',
        error: { name: 'TypeError', message: 'boom' },
        notBeforeMs: AT + 1_000,
      },
      'task RETRYING          t1 on acct/7: TypeError: boom by w1 (attempt 1 of 3; next in 1s)',
    ],
    [
      'expired',
      { event: 'expired', state: 'pending', attempts: 2, workerId: 'w2', token: '60' },
      'task EXPIRED           t1 on acct/7: the lease of w2 (token 60) ended without a result (attempt 2 of 3)',
    ],
    [
      'failed (dead letter)',
      { event: 'failed', state: 'failed', attempts: 3, error: { name: 'Fatal', message: 'bad input' } },
      'task FAILED            t1 on acct/7 after 3 attempts: Fatal: bad input — dead letter (leasehold retry t1)',
    ],
    ['cancelled', { event: 'cancelled', state: 'cancelled' }, 'task cancelled         t1 on acct/7'],
    [
      'retried',
      { event: 'retried', state: 'pending' },
      'task retried           t1 on acct/7: pending again with a fresh budget',
    ],
  ])('%s', (_name, over, text) => {
    expect(formatTaskEvent(task(over), AT)).toBe(`10:00:00.123 ${text}`);
  });

  it('says when task events were lost (reset)', () => {
    expect(formatTaskEvent({ type: 'reset', revision: '500', reason: 'compacted' }, AT)).toBe(
      '10:00:00.123 task RESET             task events before revision 500 could not be replayed (compacted); following from now',
    );
  });
});

describe('tail lines: sink events', () => {
  it.each<[string, SinkEvent, string | undefined]>([
    [
      'fence advanced',
      decision({ kind: 'advance', outcome: 'advanced', fenceBefore: '55', resultId: undefined, workerId: undefined }),
      'sink fence             acct/7 advanced to 57 (was 55)',
    ],
    ['advance to the same token: not shown', decision({ kind: 'advance', outcome: 'unchanged' }), undefined],
    ['write', decision({}), 'sink write             acct/7 task:t1 by w1, token 57'],
    [
      'stale write',
      decision({ outcome: 'STALE_TOKEN', token: '55', fenceBefore: '57' }),
      'sink STALE_TOKEN       acct/7 write by w1 with token 55 refused: fence is 57 (a newer holder exists)',
    ],
    [
      'fence conflict',
      decision({ outcome: 'FENCE_CONFLICT', token: '99' }),
      'sink FENCE_CONFLICT    acct/7 write by w1 with token 99 refused: fence is 57 (no grant advanced to it)',
    ],
    [
      'result conflict',
      decision({ outcome: 'RESULT_CONFLICT' }),
      'sink RESULT_CONFLICT   acct/7 write of task:t1 by w1 refused: stored before with another payload',
    ],
    [
      'forbidden',
      {
        type: 'refusal',
        route: '/v1/writes',
        code: 'FORBIDDEN',
        resource: 'acct/7',
        token: '57',
        workerId: 'mallory',
        remote: '10.0.0.9',
        atMs: AT,
      },
      'sink FORBIDDEN         write acct/7 token 57 by mallory from 10.0.0.9: credentials do not allow this (a capability that does not verify, or a read-only key)',
    ],
    [
      'unauthenticated, with suppressed refusals',
      {
        type: 'refusal',
        route: '/v1/fences/advance',
        code: 'UNAUTHENTICATED',
        remote: '10.0.0.9',
        atMs: AT,
        suppressed: 40,
      },
      'sink UNAUTHENTICATED   advance from 10.0.0.9: missing or unknown credentials (+40 more refusals not shown)',
    ],
    [
      'pruned',
      { type: 'reset', reason: 'pruned', requested: 2, resumeAfter: 99, oldestRetained: 100 },
      'sink RESET             decisions 3..99 were pruned by retention before they were shown',
    ],
  ])('%s', (_name, event, text) => {
    expect(formatSinkEvent(event, AT)).toBe(text === undefined ? undefined : `10:00:00.123 ${text}`);
  });

  it('colours problems only on a terminal', () => {
    expect(formatSinkEvent(decision({ outcome: 'STALE_TOKEN' }), AT, true)).toContain('\u001b[31mSTALE_TOKEN');
    expect(formatSinkEvent(decision({ outcome: 'STALE_TOKEN' }), AT, false)).not.toContain('\u001b');
  });

  // Every refusal the sink can publish and every refusing decision gets its own upper-case line
  // with an explanation: a kind added to the protocol without a line here fails this test.
  it.each(
    RefusalCodeSchema.options.flatMap((code) => RefusalRouteSchema.options.map((route) => [code, route] as const)),
  )('shows refusal %s on %s with its explanation', (code, route) => {
    const text = formatSinkEvent({ type: 'refusal', route, code, remote: '10.0.0.9', atMs: AT }, AT);
    expect(text).toMatch(new RegExp(`^10:00:00\\.123 sink ${code} +\\S.* from 10\\.0\\.0\\.9: \\w`));
  });

  it.each(DecisionOutcomeSchema.options.filter((o) => o === o.toUpperCase()))(
    'shows refusing decision %s upper case, as a problem',
    (outcome) => {
      const text = formatSinkEvent(decision({ outcome }), AT, true);
      expect(text).toContain(`\u001b[31m${outcome}`);
      expect(text).toContain('refused');
    },
  );
});
