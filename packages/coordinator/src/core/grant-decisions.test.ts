/** Pure grant decisions (core/grant-decisions.ts), table-tested. */
import { describe, expect, it } from 'vitest';
import {
  admitAcquire,
  isTakeover,
  needsRequestRead,
  pollDelayMs,
  replayVerdict,
  type ReplayFacts,
} from './grant-decisions.js';

describe('replayVerdict: a repeated acquire gets its recorded grant only while that grant is still its own', () => {
  const base: ReplayFacts<string> = {
    recordedToken: 5n,
    sessionId: 's1',
    owner: { token: 5n, record: { sessionId: 's1' } },
    task: 'task',
    payload: { n: 1 },
  };
  it.each([
    ['the owner is this session at the recorded token', base, { ok: true, task: 'task', payload: { n: 1 } }],
    ['no owner any more', { ...base, owner: undefined }, { ok: false, code: 'NOT_HOLDER' }],
    [
      'the owner holds another token',
      { ...base, owner: { token: 6n, record: { sessionId: 's1' } } },
      { ok: false, code: 'NOT_HOLDER' },
    ],
    [
      "the owner at that token is another session's (a request id another session reuses)",
      { ...base, owner: { token: 5n, record: { sessionId: 's2' } } },
      { ok: false, code: 'NOT_HOLDER' },
    ],
    ['the task or its payload is gone', { ...base, payload: undefined }, { ok: false, code: 'INTERNAL' }],
  ])('%s', (_name, facts, verdict) => {
    expect(replayVerdict(facts)).toEqual(verdict);
  });
});

describe('isTakeover: the last attempt was lost', () => {
  it.each([
    [{ lastEvent: 'submitted' }, false],
    [{ lastEvent: 'released' }, false],
    [{ lastEvent: 'retrying' }, false],
    [{ lastEvent: 'abandoned' }, false],
    [{ lastEvent: 'expired' }, true],
    [{ lastEvent: 'granted', open: { attempt: 1 } }, true],
  ])('%j -> %s', (task, expected) => {
    expect(isTakeover(task)).toBe(expected);
  });
});

describe('admitAcquire', () => {
  it.each([
    ['below capacity', { grantedRequestIds: new Set<string>(), held: 1, acquiring: 0, capacity: 2 }, 'r', true],
    ['at capacity', { grantedRequestIds: new Set<string>(), held: 1, acquiring: 1, capacity: 2 }, 'r', false],
    [
      'at capacity, a repeat of a granted request',
      { grantedRequestIds: new Set(['r']), held: 2, acquiring: 0, capacity: 2 },
      'r',
      true,
    ],
  ])('%s', (_name, view, requestId, ok) => {
    expect(admitAcquire(view, requestId).ok).toBe(ok);
  });
});

describe('pollDelayMs: a long poll never outlives its session', () => {
  it.each([
    ['the poll ends first', 1_000, 5_000, 1_000],
    ['the session ends first: just past its end', 5_000, 1_000, 1_001],
  ])('%s', (_name, leftMs, sessionLeftMs, expected) => {
    expect(pollDelayMs(leftMs, sessionLeftMs)).toBe(expected);
  });
});

describe('needsRequestRead: an acquire that found nothing reads its holding unless the session knows its requests', () => {
  it.each([
    [
      'resumed or adopted: always',
      { requestsKnown: false, grantedRequestIds: new Set<string>(), unsureRequestIds: new Set<string>() },
      'q1',
      true,
    ],
    [
      'known, the id one of its grants (a retry)',
      { requestsKnown: true, grantedRequestIds: new Set(['q0', 'q1']), unsureRequestIds: new Set<string>() },
      'q1',
      true,
    ],
    [
      'known, the id one whose grant txn failed unanswered (a lost reply)',
      { requestsKnown: true, grantedRequestIds: new Set(['q0']), unsureRequestIds: new Set(['q1']) },
      'q1',
      true,
    ],
    [
      'known, a new id',
      { requestsKnown: true, grantedRequestIds: new Set(['q0']), unsureRequestIds: new Set(['q2']) },
      'q1',
      false,
    ],
  ])('%s', (_name, view, requestId, read) => {
    expect(needsRequestRead(view, requestId)).toBe(read);
  });
});
