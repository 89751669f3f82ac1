/**
 * The store's batching rules, shared by its operations (pure: the txn is passed in): a batch of
 * jobs is tried as one txn; when that txn's compares fail, one txn per job tells which; a thrown
 * txn (outcome unknown) fails every job of it — nothing is re-sent blindly.
 */
import type { LeaseOutcome, Settled } from '../store/port.js';

/** The outcome of `run`, or what it threw (the outcome is then unknown). */
export async function settle<O>(run: () => Promise<O>): Promise<Settled<O>> {
  try {
    return { ok: true, value: await run() };
  } catch (error) {
    return { ok: false, error };
  }
}

/** One txn for the whole batch; when its compares fail, one per item: the items that landed. */
export async function wholeThenEach<T>(
  batch: readonly T[],
  run: (items: readonly T[]) => Promise<boolean>,
): Promise<T[]> {
  if (await run(batch)) return [...batch];
  const landed: T[] = [];
  if (batch.length > 1) for (const one of batch) if (await run([one])) landed.push(one);
  return landed;
}

/**
 * One txn for the whole batch when its items are distinct and fit; if that txn fails a compare,
 * one txn per item tells which. A thrown batch txn (outcome unknown) fails every item of it:
 * nothing is re-sent blindly.
 */
export async function batchedOutcomes<T>(
  items: readonly T[],
  distinct: boolean,
  max: number,
  run: (batch: readonly T[]) => Promise<LeaseOutcome>,
): Promise<Settled<LeaseOutcome>[]> {
  if (items.length > 1 && distinct && items.length <= max) {
    const all = await settle(() => run(items));
    if (!all.ok) return items.map(() => all);
    if (all.value.kind === 'done') {
      const done = all.value;
      return items.map(() => ({ ok: true, value: done }));
    }
  }
  return Promise.all(items.map((item) => settle(() => run([item]))));
}
