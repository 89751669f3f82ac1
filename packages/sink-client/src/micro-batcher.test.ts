import { describe, expect, it } from 'vitest';
import { MicroBatcher, type Settled } from './micro-batcher.js';

/** A call the test ends by hand: what each call received, and a way to answer it. */
function controlled() {
  const calls: { items: readonly number[]; answer: (fail?: Error) => void }[] = [];
  const run = (items: readonly number[]): Promise<readonly Settled<number>[]> =>
    new Promise((resolve, reject) => {
      calls.push({
        items,
        answer: (fail) => {
          if (fail === undefined) resolve(items.map((value) => ({ ok: true as const, value: value * 10 })));
          else reject(fail);
        },
      });
    });
  return { calls, run };
}
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('MicroBatcher (group commit)', () => {
  it('items of one turn leave as one call; each submitter gets its own outcome', async () => {
    const { calls, run } = controlled();
    const sizes: number[] = [];
    const b = new MicroBatcher(run, 64, { observe: (n) => sizes.push(n) });
    const out = Promise.all([1, 2, 3].map((i) => b.submit(i)));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2, 3]]);
    calls[0]?.answer();
    await expect(out).resolves.toEqual([10, 20, 30]);
    expect(sizes).toEqual([3]);
  });

  it('while a call runs, what arrives waits and then leaves together in one call', async () => {
    const { calls, run } = controlled();
    const b = new MicroBatcher(run, 64);
    const first = b.submit(1);
    await turn();
    expect(calls).toHaveLength(1);
    const later: Promise<number>[] = [];
    for (let i = 2; i <= 6; i += 1) {
      later.push(b.submit(i));
      await turn(); // each in its own turn: without the in-flight limit each would be its own call
    }
    expect(calls).toHaveLength(1);
    expect(b.waiting).toBe(5);
    calls[0]?.answer();
    await first;
    await turn();
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3, 4, 5, 6]]);
    calls[1]?.answer();
    await expect(Promise.all(later)).resolves.toEqual([20, 30, 40, 50, 60]);
    expect(b.inFlight).toBe(0);
  });

  it('maxInFlight calls run at once; maxBatch splits what waits', async () => {
    const { calls, run } = controlled();
    const b = new MicroBatcher(run, 2, { maxInFlight: 2 });
    const all = Promise.all([1, 2, 3, 4, 5].map((i) => b.submit(i)));
    await turn();
    expect(calls.map((c) => c.items)).toEqual([
      [1, 2],
      [3, 4],
    ]);
    calls[0]?.answer();
    await turn();
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3, 4], [5]]);
    calls[1]?.answer();
    calls[2]?.answer();
    await expect(all).resolves.toEqual([10, 20, 30, 40, 50]);
  });

  it('a failed call rejects its own items only and frees its slot for the next', async () => {
    const { calls, run } = controlled();
    const b = new MicroBatcher(run, 64);
    const failing = [b.submit(1), b.submit(2)];
    await turn();
    const next = b.submit(3);
    await turn();
    calls[0]?.answer(new Error('etcd said no'));
    for (const f of failing) await expect(f).rejects.toThrow('etcd said no');
    await turn();
    expect(calls.map((c) => c.items)).toEqual([[1, 2], [3]]);
    calls[1]?.answer();
    await expect(next).resolves.toBe(30);
  });

  it('a run that throws before returning a promise rejects its items and frees its slot', async () => {
    let n = 0;
    const b = new MicroBatcher<number, number>((items) => {
      n += 1;
      if (n === 1) throw new Error('sync throw');
      return Promise.resolve(items.map((value) => ({ ok: true as const, value })));
    }, 64);
    await expect(b.submit(1)).rejects.toThrow('sync throw');
    await expect(b.submit(2)).resolves.toBe(2);
    expect(b.inFlight).toBe(0);
  });

  it('an item with no result of its own is rejected, not left hanging', async () => {
    const b = new MicroBatcher<number, number>(() => Promise.resolve([{ ok: true as const, value: 1 }]), 64);
    const [a, c] = [b.submit(1), b.submit(2)];
    await expect(a).resolves.toBe(1);
    await expect(c).rejects.toThrow('too few results');
  });
});
