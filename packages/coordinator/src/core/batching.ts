/**
 * The store's batching rules, shared by its operations (pure: the txn is passed in): a batch of
 * jobs is tried as one txn; when that txn's compares fail, one txn per job tells which; a thrown
 * txn (outcome unknown) fails every job of it — nothing is re-sent blindly. (Grants, finishes,
 * purges and session ends need neither: each of their jobs is a nested txn judged on its own.)
 */
import type { Settled } from '../store/port.js';

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
