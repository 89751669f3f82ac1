/** The session-end plan as a table: what it does next for each thing the shell saw. */
import { describe, expect, it } from 'vitest';
import { SessionEndPlan, type EndAction } from './session-end.js';

const held = (n: number) => Array.from({ length: n }, (_, i) => ({ resource: `r${i}`, token: BigInt(100 + i) }));
const plan = (giveUpAtMs = 10_000, maxRounds?: number) =>
  new SessionEndPlan({ maxOwnersPerTxn: 3, giveUpAtMs, ...(maxRounds === undefined ? {} : { maxRounds }) });

describe('SessionEndPlan', () => {
  it('starts from the index, ending its holdings with the index revision as the bound', () => {
    const p = plan();
    expect(p.first()).toEqual({ kind: 'endFromIndex' });
    expect(p.fromIndex(held(2), 42n)).toEqual({ kind: 'end', held: held(2), knownUpTo: 42n });
    expect(p.fromIndex(held(3), 42n)).toEqual({ kind: 'end', held: held(3), knownUpTo: 42n });
  });

  it('closes instead of ending when more owner keys than one txn may delete', () => {
    expect(plan().fromIndex(held(4), 42n)).toEqual({ kind: 'close', held: held(4) });
    expect(plan().next({ kind: 'holdings', session: 'ours', held: held(4) })).toEqual({ kind: 'close', held: held(4) });
  });

  it.each<[string, Parameters<SessionEndPlan['next']>[0], EndAction]>([
    [
      'ended: finish, revoke, free at the end revision',
      { kind: 'ended', held: held(2), outcome: { kind: 'ended', revision: 9n } },
      { kind: 'finish', result: 'ended', held: held(2), revoke: true, revision: 9n },
    ],
    [
      'end found the session gone: finish gone (revoke what may be left)',
      { kind: 'ended', held: held(2), outcome: { kind: 'gone' } },
      { kind: 'finish', result: 'gone', held: [], revoke: true },
    ],
    [
      'end found a peer serving it: finish moved, no revoke',
      { kind: 'ended', held: held(2), outcome: { kind: 'moved' } },
      { kind: 'finish', result: 'moved', held: [], revoke: false },
    ],
    [
      'holdings changed: read them from the store',
      { kind: 'ended', held: held(2), outcome: { kind: 'changed' } },
      { kind: 'readHoldings' },
    ],
    [
      'closed: finish ended, revoke (the revoke deletes the keys), no index revision',
      { kind: 'closed', held: held(5), outcome: { kind: 'closed', modRevision: 7n } },
      { kind: 'finish', result: 'ended', held: held(5), revoke: true },
    ],
    [
      'close found the session gone',
      { kind: 'closed', held: held(5), outcome: { kind: 'gone' } },
      { kind: 'finish', result: 'gone', held: [], revoke: true },
    ],
    [
      'close found a peer serving it',
      { kind: 'closed', held: held(5), outcome: { kind: 'moved' } },
      { kind: 'finish', result: 'moved', held: [], revoke: false },
    ],
    [
      'holdings read: ours -> end them (no index bound)',
      { kind: 'holdings', session: 'ours', held: held(1) },
      { kind: 'end', held: held(1) },
    ],
    [
      'holdings read: the session is gone',
      { kind: 'holdings', session: 'gone', held: [] },
      { kind: 'finish', result: 'gone', held: [], revoke: true },
    ],
    [
      'holdings read: a peer serves it',
      { kind: 'holdings', session: 'moved', held: held(1) },
      { kind: 'finish', result: 'moved', held: [], revoke: false },
    ],
    ['after a wait: read again', { kind: 'waited' }, { kind: 'readHoldings' }],
  ])('%s', (_name, seen, next) => {
    expect(plan().next(seen)).toStrictEqual(next);
  });

  it('retries store errors with doubling waits, capped, until the give-up time, then leaves it to the lease', () => {
    const p = plan(1_000);
    const waits = [0, 1, 2, 3, 4, 5, 6, 7].map(() => p.next({ kind: 'error', nowMs: 999 }));
    expect(waits.map((w) => (w.kind === 'wait' ? w.ms : -1))).toEqual([25, 50, 100, 200, 400, 500, 500, 500]);
    expect(p.next({ kind: 'error', nowMs: 1_000 })).toMatchObject({ kind: 'wait' });
    expect(p.next({ kind: 'error', nowMs: 1_001 })).toEqual({ kind: 'finish', result: 'gone', held: [], revoke: true });
  });

  it('closes after too many rounds of changing holdings (never loops for ever)', () => {
    const p = plan(10_000, 2);
    const changed = { kind: 'ended', held: held(1), outcome: { kind: 'changed' } } as const;
    expect(p.next(changed)).toEqual({ kind: 'readHoldings' });
    expect(p.next({ kind: 'holdings', session: 'ours', held: held(1) })).toEqual({ kind: 'end', held: held(1) });
    expect(p.next(changed)).toEqual({ kind: 'readHoldings' });
    expect(p.next({ kind: 'holdings', session: 'ours', held: held(1) })).toEqual({ kind: 'close', held: held(1) });
  });

  it('defaults to 8 rounds', () => {
    const p = plan();
    const changed = { kind: 'ended', held: held(1), outcome: { kind: 'changed' } } as const;
    for (let i = 0; i < 7; i += 1) p.next(changed);
    expect(p.next({ kind: 'holdings', session: 'ours', held: held(1) })).toEqual({ kind: 'end', held: held(1) });
    p.next(changed);
    expect(p.next({ kind: 'holdings', session: 'ours', held: held(1) })).toEqual({ kind: 'close', held: held(1) });
  });
});
