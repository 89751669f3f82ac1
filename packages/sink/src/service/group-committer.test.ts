import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { FenceOp, OpDecision } from '../core/ops.js';
import type { LeaseholdError } from '../errors.js';
import type { FenceStore } from '../store/port.js';
import { SqliteFenceStore } from '../store/sqlite-store.js';
import { GroupCommitter } from './group-committer.js';

const silent = pino({ level: 'silent' });
const adv = (resource: string, token: bigint): FenceOp => ({ kind: 'advance', resource, token });

/** An asynchronous store (like PostgreSQL would be): commits resolve when the test says so. */
function manualStore() {
  const inner = new SqliteFenceStore({ path: ':memory:' });
  const batches: (readonly FenceOp[])[] = [];
  const gates: (() => void)[] = [];
  const store: Pick<FenceStore, 'applyBatch'> = {
    applyBatch: async (ops) => {
      batches.push(ops);
      await new Promise<void>((resolve) => gates.push(resolve));
      return inner.applyBatch(ops);
    },
  };
  return { store: store as FenceStore, batches, release: () => gates.shift()?.() };
}

/** A SQLite store in memory that records the size of each batch it commits. */
function sizingStore() {
  const inner = new SqliteFenceStore({ path: ':memory:' });
  const sizes: number[] = [];
  const store = {
    applyBatch: (ops: readonly FenceOp[]) => {
      sizes.push(ops.length);
      return inner.applyBatch(ops);
    },
  } as FenceStore;
  return { store, sizes };
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('GroupCommitter', () => {
  it('commits requests of one event-loop turn in one batch, in arrival order', async () => {
    const { store, sizes } = sizingStore();
    const committer = new GroupCommitter({ store, logger: silent });
    const answers = await Promise.all([
      committer.submit([adv('r', 1n)]),
      committer.submit([adv('r', 3n), adv('r', 2n)]),
      committer.submit([adv('r', 3n)]),
    ]);
    expect(sizes).toEqual([4]);
    expect(answers.map((a) => a.map((d) => (d.ok ? d.outcome : d.code)))).toEqual([
      ['advanced'],
      ['advanced', 'STALE_TOKEN'],
      ['unchanged'],
    ]);
  });

  it('does not start a commit while one is in flight; what arrives meanwhile forms the next batch', async () => {
    const { store, batches, release } = manualStore();
    const committer = new GroupCommitter({ store, logger: silent });
    const first = committer.submit([adv('r', 1n)]);
    await tick();
    expect(batches.length).toBe(1);
    const second = committer.submit([adv('r', 2n)]);
    const third = committer.submit([adv('r', 2n)]);
    await tick();
    await tick();
    expect(batches.length).toBe(1);
    release();
    await first;
    await tick();
    expect(batches.map((b) => b.length)).toEqual([1, 2]);
    release();
    expect((await second)[0]).toEqual({ ok: true, outcome: 'advanced', fence: 2n });
    expect((await third)[0]).toEqual({ ok: true, outcome: 'unchanged', fence: 2n });
  });

  it('splits at maxBatchOps but never splits one submission', async () => {
    const { store, sizes } = sizingStore();
    const committer = new GroupCommitter({ store, logger: silent, maxBatchOps: 3 });
    await Promise.all([
      committer.submit([adv('a', 1n), adv('b', 1n)]),
      committer.submit([adv('c', 1n), adv('d', 1n)]),
      committer.submit([adv('e', 1n), adv('f', 1n), adv('g', 1n), adv('h', 1n)]),
    ]);
    expect(sizes).toEqual([2, 2, 4]);
  });

  it('rejects every submission of a failed batch with retryable UNAVAILABLE', async () => {
    const store = { applyBatch: () => Promise.reject(new Error('SQLITE_FULL')) } as unknown as FenceStore;
    const committer = new GroupCommitter({ store, logger: silent });
    const results = await Promise.allSettled([committer.submit([adv('r', 1n)]), committer.submit([adv('s', 1n)])]);
    for (const r of results) {
      expect(r.status).toBe('rejected');
      const err = (r as PromiseRejectedResult).reason as LeaseholdError;
      expect(err.code).toBe('UNAVAILABLE');
      expect(err.retryable).toBe(true);
      expect(err.message).toContain('SQLITE_FULL');
    }
  });

  it('close commits what is queued and in flight, then refuses new work with SHUTTING_DOWN', async () => {
    const { store, batches, release } = manualStore();
    const committer = new GroupCommitter({ store, logger: silent });
    const inFlight = committer.submit([adv('r', 1n)]);
    await tick();
    const queued = committer.submit([adv('r', 2n)]);
    let closed = false;
    const closing = committer.close().then(() => {
      closed = true;
    });
    await expect(committer.submit([adv('r', 3n)])).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
    release();
    await inFlight;
    await tick();
    expect(closed).toBe(false);
    release();
    const answers: readonly OpDecision[] = await queued;
    await closing;
    expect(closed).toBe(true);
    expect(answers[0]).toEqual({ ok: true, outcome: 'advanced', fence: 2n });
    expect(batches.length).toBe(2);
  });
});
