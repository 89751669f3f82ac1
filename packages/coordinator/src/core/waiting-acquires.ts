/**
 * The long-poll acquires waiting on this coordinator, and which of them a change wakes.
 *
 * A change readies queues (a task submitted, an owner freed, a hold ended, a delayed task promoted
 * by the grant service's due timer). Waking every acquire that serves a readied queue — as this did
 * before — made every task wake every waiting acquire of its queue: each selected, one took the
 * task, the others found nothing and waited again. Measured under the bench's takeover suite at
 * half the cycle rate: ~6 to 8 wakes per grant, 87 % of them finding nothing; with W slots waiting,
 * one task cost W selects.
 *
 * Now each readied queue starts a chain: its oldest waiting acquire is woken carrying the queue
 * (the baton). An acquire woken with a baton that selects a task passes the baton to the next
 * waiting acquire of that queue before it grants (so the chain runs while grants are in flight);
 * one that finds nothing ends the chain — its select covered every queue it serves, that queue
 * included, so nothing in that queue is grantable now; one that ends without selecting (its
 * session ended, shutdown) passes the baton on. A queue with k grantable tasks thus wakes k + 1
 * acquires, not all of them.
 *
 * Acquires that select one task only (`taskId`) are never part of a chain (their select says
 * nothing of the queue's other tasks). Each is woken when its own task became grantable: the index
 * notes the tasks it readied with their queues. Before, every change of their queues woke every one
 * of them: W acquires waiting for W tasks of a queue (the bench's takeover suite: 64 takers, one
 * task each) paid W wakes for every task freed, W² for the lot. Past the index's bound on the tasks
 * it notes ('all'), they are woken by every change of their queues again.
 *
 * Delayed tasks: before, each waiting acquire timed its wait by the earliest due time of all, so
 * every due time woke every waiting acquire of every queue, and each new delayed task re-timed the
 * waiting acquires of its queue. Now no waiter times its wait by a due time: the grant service's one
 * due timer promotes the due tasks, which readies their queues like any other change.
 *
 * Pure: no I/O, no timers. Waiting acquires are kept oldest first per queue, so each chain wakes in
 * arrival order and starting or passing one is bounded by the queues named, not by the acquires
 * waiting; waking `taskId` acquires is bounded by the tasks readied (one lookup each), except past
 * the index's bound, when each such change looks at every `taskId` acquire.
 */
import { wakesFor } from './queues.js';
import type { Readied } from './task-index.js';

/** What wakes a waiting acquire: with the queue whose chain it carries, or none (timer, session end, shutdown). */
export type WakeUp = (baton?: string) => void;

interface Waiter {
  readonly queues: readonly string[];
  /** Selects this task only: woken when it became grantable, never part of a chain. */
  readonly taskId: string | undefined;
}

export class WaitingAcquires {
  readonly #all = new Map<WakeUp, Waiter>();
  /** Unrestricted waiters by queue, oldest first. */
  readonly #byQueue = new Map<string, Set<WakeUp>>();
  /** Waiters for one task id, by task id. */
  readonly #byTask = new Map<string, Set<WakeUp>>();

  get size(): number {
    return this.#all.size;
  }

  /** It waits for a task of `queues`; with `taskId`, for that task only. */
  add(wakeUp: WakeUp, queues: readonly string[], taskId?: string): void {
    this.#all.set(wakeUp, { queues, taskId });
    if (taskId !== undefined) {
      addTo(this.#byTask, taskId, wakeUp);
      return;
    }
    for (const queue of queues) addTo(this.#byQueue, queue, wakeUp);
  }

  /** It stopped waiting (woken, timed out, ended): idempotent. */
  remove(wakeUp: WakeUp): void {
    const waiter = this.#all.get(wakeUp);
    if (waiter === undefined) return;
    this.#all.delete(wakeUp);
    if (waiter.taskId !== undefined) {
      deleteFrom(this.#byTask, waiter.taskId, wakeUp);
      return;
    }
    for (const queue of waiter.queues) deleteFrom(this.#byQueue, queue, wakeUp);
  }

  /**
   * Who a change that readied `readied` wakes, each with the baton it carries: the oldest
   * unrestricted waiter of each readied queue (a distinct one per queue while there are enough),
   * and the waiters for each readied task id (every `taskId` waiter serving a readied queue, when
   * the tasks are 'all'). Queues 'all': every waiter, no baton.
   * The caller calls each (and each removes itself).
   */
  wakesFor(readied: Readied): [WakeUp, string | undefined][] {
    const { queues, tasks } = readied;
    if (queues === 'all') return [...this.#all.keys()].map((w) => [w, undefined]);
    const out: [WakeUp, string | undefined][] = [];
    const picked = new Set<WakeUp>();
    for (const queue of queues) {
      for (const wakeUp of this.#byQueue.get(queue) ?? []) {
        if (picked.has(wakeUp)) continue;
        picked.add(wakeUp);
        out.push([wakeUp, queue]);
        break;
      }
    }
    if (this.#byTask.size === 0) return out;
    if (tasks === 'all') {
      for (const waiters of this.#byTask.values()) {
        for (const wakeUp of waiters) {
          const waiter = this.#all.get(wakeUp);
          if (waiter !== undefined && wakesFor(waiter.queues, queues)) out.push([wakeUp, undefined]);
        }
      }
      return out;
    }
    for (const taskId of tasks) {
      for (const wakeUp of this.#byTask.get(taskId) ?? []) out.push([wakeUp, undefined]);
    }
    return out;
  }

  /** The next waiter of `queue`'s chain (the oldest unrestricted one waiting), if any. */
  next(queue: string): WakeUp | undefined {
    for (const wakeUp of this.#byQueue.get(queue) ?? []) return wakeUp;
    return undefined;
  }

  /** Every waiter (shutdown). */
  all(): WakeUp[] {
    return [...this.#all.keys()];
  }
}

function addTo(map: Map<string, Set<WakeUp>>, key: string, wakeUp: WakeUp): void {
  let set = map.get(key);
  if (set === undefined) map.set(key, (set = new Set()));
  set.add(wakeUp);
}

function deleteFrom(map: Map<string, Set<WakeUp>>, key: string, wakeUp: WakeUp): void {
  const set = map.get(key);
  set?.delete(wakeUp);
  if (set?.size === 0) map.delete(key);
}
