/** The store's batching rules (core/batching.ts), on a recorded `run`: no etcd needed. */
import { describe, expect, it } from 'vitest';
import { wholeThenEach } from './batching.js';

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
