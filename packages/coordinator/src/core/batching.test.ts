/** The store's batching rules (core/batching.ts), on a recorded `run`: no etcd needed. */
import { describe, expect, it } from 'vitest';
import type { LeaseOutcome } from '../store/port.js';
import { batchedOutcomes, wholeThenEach } from './batching.js';

const done: LeaseOutcome = { kind: 'done', revision: 7n };
const refused: LeaseOutcome = { kind: 'notHolder' };

/** A run that records each batch it was given and answers with `answer(batch)`. */
function recorded<T, O>(answer: (batch: readonly T[]) => O | Error) {
  const calls: T[][] = [];
  const run = (batch: readonly T[]): Promise<O> => {
    calls.push([...batch]);
    const out = answer(batch);
    return out instanceof Error ? Promise.reject(out) : Promise.resolve(out);
  };
  return { calls, run };
}

describe('batchedOutcomes', () => {
  it('distinct items that fit: one txn for all; its done answers every item', async () => {
    const { calls, run } = recorded<string, LeaseOutcome>(() => done);
    const out = await batchedOutcomes(['a', 'b', 'c'], true, 8, run);
    expect(calls).toEqual([['a', 'b', 'c']]);
    expect(out).toEqual([0, 1, 2].map(() => ({ ok: true, value: done })));
  });

  it('items that are not distinct never share a txn (two ops on one key): one txn each', async () => {
    const { calls, run } = recorded<string, LeaseOutcome>(() => done);
    await batchedOutcomes(['a', 'a'], false, 8, run);
    expect(calls).toEqual([['a'], ['a']]);
  });

  it('more items than fit one txn: one txn each', async () => {
    const { calls, run } = recorded<string, LeaseOutcome>(() => done);
    await batchedOutcomes(['a', 'b', 'c'], true, 2, run);
    expect(calls).toEqual([['a'], ['b'], ['c']]);
  });

  it('a batch txn that failed a compare: one txn per item tells which', async () => {
    const { calls, run } = recorded<string, LeaseOutcome>((batch) =>
      batch.length > 1 || batch[0] === 'b' ? refused : done,
    );
    const out = await batchedOutcomes(['a', 'b'], true, 8, run);
    expect(calls).toEqual([['a', 'b'], ['a'], ['b']]);
    expect(out).toEqual([
      { ok: true, value: done },
      { ok: true, value: refused },
    ]);
  });

  it('a batch txn that threw (outcome unknown) fails every item with its error and is never re-sent', async () => {
    const lost = new Error('reply lost');
    const { calls, run } = recorded<string, LeaseOutcome>(() => lost);
    const out = await batchedOutcomes(['a', 'b'], true, 8, run);
    expect(calls).toEqual([['a', 'b']]);
    expect(out).toEqual([
      { ok: false, error: lost },
      { ok: false, error: lost },
    ]);
  });
});

describe('wholeThenEach', () => {
  it('the whole batch landed: every item, one txn', async () => {
    const { calls, run } = recorded<number, boolean>(() => true);
    expect(await wholeThenEach([1, 2], run)).toEqual([1, 2]);
    expect(calls).toEqual([[1, 2]]);
  });

  it('the batch failed its compares: each item alone, the ones that land', async () => {
    const { calls, run } = recorded<number, boolean>((batch) => batch.length === 1 && batch[0] !== 2);
    expect(await wholeThenEach([1, 2, 3], run)).toEqual([1, 3]);
    expect(calls).toEqual([[1, 2, 3], [1], [2], [3]]);
  });

  it('a batch of one that failed is not tried again', async () => {
    const { calls, run } = recorded<number, boolean>(() => false);
    expect(await wholeThenEach([1], run)).toEqual([]);
    expect(calls).toEqual([[1]]);
  });
});
