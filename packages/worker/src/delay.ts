/** A wait that an AbortSignal ends early, leaving no timer behind. */
import { setTimeout as wait } from 'node:timers/promises';

/** Resolves true after `ms`, or false as soon as `signal` aborts (at once if it has). */
export async function delay(ms: number, signal?: AbortSignal): Promise<boolean> {
  if (signal?.aborted === true) return false;
  try {
    await wait(Math.max(0, ms), undefined, signal === undefined ? undefined : { signal });
    return true;
  } catch {
    return false;
  }
}
