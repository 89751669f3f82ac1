/** How end txns are grouped (endBatches): what may share a txn, and what must go alone. */
import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import type { EndArgs, SettleArgs } from '../../store/port.js';
import { KeyLayout } from '../keys.js';
import { Kv } from '../kv.js';
import {
  closeSession,
  endBatches,
  endNests,
  endOpsOf,
  endSessions,
  MAX_END_SESSION_OWNERS,
  MAX_ENDS_PER_TXN,
} from './session-txns.js';
import { ETCD_MAX_TXN_OPS } from './grant-txns.js';

const end = (sessionId: string, resources: string[]): EndArgs => ({
  sessionId,
  knownModRevision: 5n,
  held: resources.map((resource, i) => ({ resource, token: BigInt(10 + i) })),
});

describe('endBatches', () => {
  it('puts up to MAX_ENDS_PER_TXN small ends in one txn, in order', () => {
    const batch = Array.from({ length: MAX_ENDS_PER_TXN + 3 }, (_, i) => end(`s${i}`, [`r${i}`]));
    const groups = endBatches(batch);
    expect(groups.map((g) => g.length)).toEqual([MAX_ENDS_PER_TXN, 3]);
    expect(groups.flat()).toEqual(batch.map((_, i) => i));
  });

  it('never puts one session or one owner key twice in a txn (both could settle its task: a key put twice)', () => {
    const groups = endBatches([end('s1', ['r1']), end('s2', ['r2']), end('s3', ['r1']), end('s1', []), end('s4', [])]);
    // s3 names r1 as s1 does: a txn of its own; s1's second end joins it, not its first.
    expect(groups).toEqual([
      [0, 1],
      [2, 3, 4],
    ]);
  });

  it('sends an end whose lists pass what a nested txn may have in a txn of its own', () => {
    const big = end(
      'big',
      Array.from({ length: MAX_END_SESSION_OWNERS }, (_, i) => `b${i}`),
    );
    expect(endOpsOf(big)).toBe(MAX_END_SESSION_OWNERS + 2);
    expect(endNests(big)).toBe(false);
    const fits = end(
      'fits',
      Array.from({ length: ETCD_MAX_TXN_OPS - MAX_ENDS_PER_TXN - 2 }, (_, i) => `f${i}`),
    );
    expect(endNests(fits)).toBe(true);
    expect(
      endNests(
        end(
          'over',
          Array.from({ length: ETCD_MAX_TXN_OPS - MAX_ENDS_PER_TXN - 1 }, (_, i) => `o${i}`),
        ),
      ),
    ).toBe(false);
    expect(endBatches([end('a', ['ra']), big, end('b', ['rb'])])).toEqual([[0, 2], [1]]);
    // An end the txn would refuse (a settlement of no held owner key) goes alone: it fails no other.
    const stray: EndArgs = {
      ...end('stray', ['rs']),
      settle: [{ token: 99n, prev: {}, next: { taskId: 't', resource: 'elsewhere' } } as unknown as SettleArgs],
    };
    expect(endNests(stray)).toBe(false);
    expect(endBatches([end('a', ['ra']), stray, end('b', ['rb'])])).toEqual([[0, 2], [1]]);
  });
});

describe('endSessions', () => {
  it('refuses, before sending anything, a batch etcd would refuse or endBatches would split', async () => {
    const timers = new ManualTimers(new ManualClock(1_000));
    const kv = new Kv(new MemoryEtcd({ clock: timers.clock, timers }).connect());
    const sent: string[] = [];
    const txn = kv.txn.bind(kv);
    kv.txn = (name, spec) => {
      sent.push(name);
      return txn(name, spec);
    };
    const keys = new KeyLayout('p/');
    await expect(endSessions(kv, keys, [end('s1', ['r1']), end('s2', ['r1'])])).rejects.toThrow(RangeError);
    await expect(endSessions(kv, keys, [end('s1', ['r1']), end('s1', ['r2'])])).rejects.toThrow(RangeError);
    const many = Array.from({ length: MAX_ENDS_PER_TXN + 1 }, (_, i) => end(`s${i}`, [`r${i}`]));
    await expect(endSessions(kv, keys, many)).rejects.toThrow(RangeError);
    await expect(endSessions(kv, keys, [])).rejects.toThrow(RangeError);
    expect(sent).toEqual([]);
  });
});

describe('the txns of an expiry', () => {
  it('are urgent: an end and a close are never held back to share an etcd request', async () => {
    const timers = new ManualTimers(new ManualClock(1_000));
    const kv = new Kv(new MemoryEtcd({ clock: timers.clock, timers }).connect());
    const urgent: [string, boolean | undefined][] = [];
    const txn = kv.txn.bind(kv);
    kv.txn = (name, spec, options) => {
      urgent.push([name, options?.urgent]);
      return txn(name, spec, options);
    };
    const keys = new KeyLayout('p/');
    await endSessions(kv, keys, [end('s1', ['r1'])]);
    await endSessions(kv, keys, [end('s2', ['r2']), end('s3', ['r3'])]);
    await closeSession(kv, keys, {
      sessionId: 's4',
      leaseId: '0',
      knownModRevision: 5n,
      record: { v: 1, workerId: 'w', incarnation: 'i', coordinatorId: 'c1', ttlMs: 5_000 } as never,
    });
    expect(urgent).toEqual([
      ['endSession', true],
      ['endSessions', true],
      ['closeSession', true],
    ]);
  });
});
