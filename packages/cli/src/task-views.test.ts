import type { TaskView } from '@leasehold/client';
import { describe, expect, it } from 'vitest';
import { submitRequestOf } from './admin-commands.js';
import { renderTaskDetail, renderTaskTable } from './task-views.js';

const NOW = Date.UTC(2026, 11, 1, 12, 0, 0);
const base: TaskView = {
  taskId: 't1',
  resource: 'acct/7',
  queue: 'default',
  payload: { n: 1 },
  payloadBytes: 7,
  state: 'failed',
  attempts: 3,
  priority: 0,
  retry: {
    maxAttempts: 3,
    backoff: { initialMs: 1_000, multiplier: 2, maxMs: 300_000, jitter: 0.2 },
    nonRetryable: [],
  },
  lastEvent: 'failed',
  lastError: { name: 'TypeError', message: 'cannot read properties of undefined' },
  history: [
    {
      attempt: 1,
      workerId: 'w1',
      token: '55',
      outcome: 'failed',
      error: { name: 'TypeError', message: 'cannot read properties of undefined' },
      startedAtMs: NOW - 600_000,
      endedAtMs: NOW - 599_880,
    },
    {
      attempt: 2,
      workerId: 'w2',
      token: '61',
      outcome: 'expired',
      startedAtMs: NOW - 590_000,
      endedAtMs: NOW - 585_000,
    },
  ],
  createdAtMs: NOW - 601_000,
  endedAtMs: NOW - 180_000,
};

describe('leasehold tasks', () => {
  it('lists dead letters with attempts, when they ended and the last error, and says what to do', () => {
    const text = renderTaskTable([base, { ...base, taskId: 't2', lastError: { name: 'Fatal', message: 'x' } }], {
      nowMs: NOW,
      tty: false,
      state: 'failed',
    });
    expect(text.split('\n')).toEqual([
      'TASK  RESOURCE  STATE   PRI  TRIES  WHEN          LAST ERROR',
      't1    acct/7    failed  0    3/3    ended 3m ago  TypeError: cannot read properties of undefined',
      't2    acct/7    failed  0    3/3    ended 3m ago  Fatal: x',
      '',
      '2 tasks: 2 failed',
      'retry one: leasehold retry ID   details: leasehold task ID   clean up: leasehold purge --state failed --older-than 7d',
    ]);
  });

  it('shows delays and holders, and says so when there is nothing', () => {
    const delayed: TaskView = { ...base, taskId: 'd', state: 'delayed', attempts: 0, notBeforeMs: NOW + 30_000 };
    delete (delayed as { lastError?: unknown }).lastError;
    const text = renderTaskTable([delayed], { nowMs: NOW, tty: false });
    expect(text).toContain('d     acct/7    delayed  0    0/3    runs in 30s');
    expect(renderTaskTable([], { nowMs: NOW, tty: false, state: 'failed' })).toBe('no failed tasks');
  });
});

describe('leasehold task ID', () => {
  it('shows the policy, the times, the last error and the attempt history', () => {
    const text = renderTaskDetail(base, { nowMs: NOW, tty: false });
    expect(text).toContain('state       failed (last event: failed)');
    expect(text).toContain('attempts    3 of 3');
    expect(text).toContain('retry       3 attempts, backoff 1s ×2 up to 5m, jitter 20%');
    expect(text).toContain('ended       2026-12-01T11:57:00.000Z (3m ago)');
    expect(text).toContain('last error  TypeError: cannot read properties of undefined');
    expect(text).toContain('history (last 2, oldest first):');
    expect(text).toContain('  1  failed   w1      55     2026-12-01T11:50:00.000Z  120ms  TypeError: cannot read');
    expect(text).toContain('  2  expired  w2      61     2026-12-01T11:50:10.000Z  5s');
    expect(text).toContain('run it again: leasehold retry t1');
  });
});

describe('leasehold submit flags', () => {
  it('turns durations, dates and repeated names into the submit request', () => {
    expect(
      submitRequestOf(
        {
          TASK_ID: 't',
          RESOURCE: 'r',
          PAYLOAD: '{"a":1}',
          PRIORITY: '5',
          DELAY: '30s',
          MAX_ATTEMPTS: '4',
          BACKOFF_INITIAL: '500ms',
          BACKOFF_MAX: '2m',
        },
        ['Fatal', 'BadInput,Other'],
      ),
    ).toEqual({
      taskId: 't',
      resource: 'r',
      payload: { a: 1 },
      priority: 5,
      delayMs: 30_000,
      retry: {
        maxAttempts: 4,
        backoff: { initialMs: 500, maxMs: 120_000 },
        nonRetryable: ['Fatal', 'BadInput', 'Other'],
      },
    });
    expect(submitRequestOf({ TASK_ID: 't', RESOURCE: 'r', RUN_AT: '2026-12-24T18:00:00+01:00' }, [])).toEqual({
      taskId: 't',
      resource: 'r',
      payload: {},
      runAt: '2026-12-24T17:00:00.000Z',
    });
  });

  it('takes --queue as the task queue (absent: none sent, the coordinator puts it in default); refuses a bad name', () => {
    expect(submitRequestOf({ TASK_ID: 't', RESOURCE: 'r', QUEUE: 'emails' }, [])).toEqual({
      taskId: 't',
      resource: 'r',
      payload: {},
      queue: 'emails',
    });
    expect(submitRequestOf({ TASK_ID: 't', RESOURCE: 'r' }, [])).not.toHaveProperty('queue');
    expect(() => submitRequestOf({ TASK_ID: 't', RESOURCE: 'r', QUEUE: '../x' }, [])).toThrow(/--queue: not a valid/);
  });

  it('turns --keep-<state> into the task retention (durations, or forever: kept until purged)', () => {
    expect(submitRequestOf({ TASK_ID: 't', RESOURCE: 'r', KEEP_COMPLETED: '10m', KEEP_FAILED: 'forever' }, [])).toEqual(
      {
        taskId: 't',
        resource: 'r',
        payload: {},
        retention: { completed: 600_000, failed: null },
      },
    );
    expect(() => submitRequestOf({ TASK_ID: 't', RESOURCE: 'r', KEEP_CANCELLED: 'later' }, [])).toThrow(
      /--keep-cancelled must be a duration/,
    );
  });

  it('lists every problem at once', () => {
    expect(() =>
      submitRequestOf({ PRIORITY: '12', DELAY: 'soon', RUN_AT: 'tomorrow', MAX_ATTEMPTS: '0', PAYLOAD: '{' }, []),
    ).toThrow(
      /--task-id and --resource[\s\S]*--payload must be JSON[\s\S]*--priority must be 0..9[\s\S]*--delay must be a duration[\s\S]*--run-at[\s\S]*--max-attempts must be at least 1/,
    );
  });
});
