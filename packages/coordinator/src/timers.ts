/** Real timers for the services (the injectable {@link Timers} of core/timers.ts). */
import type { TimerHandle, Timers } from './core/timers.js';

const handles = new Map<number, NodeJS.Timeout>();
let nextId = 1;

export const realTimers: Timers = {
  setTimeout(callback, ms) {
    const id = nextId++;
    handles.set(
      id,
      setTimeout(() => {
        handles.delete(id);
        callback();
      }, ms),
    );
    return { id };
  },
  clearTimeout(handle: TimerHandle | undefined) {
    if (handle === undefined) return;
    const timer = handles.get(handle.id);
    if (timer !== undefined) clearTimeout(timer);
    handles.delete(handle.id);
  },
};
