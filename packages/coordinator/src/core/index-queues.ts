/**
 * The queues of the task index, pure: per priority a lane (arrival queue + sorted list of tasks
 * freed again) and the heap of delayed tasks. See task-index.ts for how they are used.
 */
import { MAX_PRIORITY } from '@leasehold/protocol';
import type { PendingEntry } from './index-entry.js';

type Entry = PendingEntry;

/**
 * Free tasks that were blocked by an owner and freed again, sorted by (create_revision, arrival
 * sequence). Removal is lazy (O(1): the entry is marked dead and skipped), so re-granting thousands
 * of freed tasks costs no array shifting; dead entries are dropped from the front as selection
 * passes them and compacted away when they outnumber the live ones.
 */
export class ReturnedList {
  #entries: { readonly taskId: string; readonly revision: bigint; readonly seq: number; readonly gen: number }[] = [];
  #head = 0;
  /** Live entries: task id -> generation of its entry. */
  readonly #live = new Map<string, number>();
  #gen = 0;

  clear(): void {
    this.#entries = [];
    this.#head = 0;
    this.#live.clear();
  }

  get empty(): boolean {
    return this.#live.size === 0;
  }

  insert(taskId: string, revision: bigint, seq: number): void {
    if (this.#live.has(taskId)) return;
    const gen = ++this.#gen;
    this.#live.set(taskId, gen);
    let lo = this.#head;
    let hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const at = this.#entries[mid];
      if (at !== undefined && (at.revision < revision || (at.revision === revision && at.seq < seq))) lo = mid + 1;
      else hi = mid;
    }
    this.#entries.splice(lo, 0, { taskId, revision, seq, gen });
  }

  remove(taskId: string): boolean {
    if (!this.#live.delete(taskId)) return false;
    if (this.#entries.length - this.#head > 64 && this.#live.size * 2 < this.#entries.length - this.#head) {
      this.#entries = this.#entries.slice(this.#head).filter((e) => this.#live.get(e.taskId) === e.gen);
      this.#head = 0;
    }
    return true;
  }

  /** Live entries in order, from position `from` (a cursor into the list); moves the head past dead ones. */
  liveAt(
    from: number,
  ): { readonly taskId: string; readonly revision: bigint; readonly seq: number; next: number } | undefined {
    let i = Math.max(from, this.#head);
    for (; i < this.#entries.length; i += 1) {
      const e = this.#entries[i];
      if (e !== undefined && this.#live.get(e.taskId) === e.gen) {
        return { taskId: e.taskId, revision: e.revision, seq: e.seq, next: i + 1 };
      }
      if (i === this.#head) this.#head += 1;
    }
    if (this.#live.size === 0) this.clear();
    return undefined;
  }
}

/** Ready tasks of one priority: a queue in arrival order plus the sorted list of returned ones. */
export class Lane {
  /** Free tasks that were never blocked, in arrival order. */
  readonly queue = new Map<string, Entry>();
  /** Free tasks that were blocked (or delayed) and freed again, sorted like the queue. */
  readonly returned = new ReturnedList();
  /** Order key (create_revision, seq) of the last task appended to `queue`. */
  #lastRevision = -1n;
  #lastSeq = -1;

  add(task: Entry): void {
    // New tasks arrive in create order, so appending keeps the queue sorted; anything older than
    // what was queued last goes to the sorted returned list instead.
    const seq = task.seq;
    if (
      task.createRevision > this.#lastRevision ||
      (task.createRevision === this.#lastRevision && seq > this.#lastSeq)
    ) {
      this.queue.set(task.taskId, task);
      this.#lastRevision = task.createRevision;
      this.#lastSeq = seq;
    } else {
      this.returned.insert(task.taskId, task.createRevision, seq);
    }
  }

  remove(taskId: string): void {
    if (!this.queue.delete(taskId)) this.returned.remove(taskId);
  }
}

/** One queue of the index: a lane per priority, its pending count and its ended tasks by state. */
export class QueueLanes {
  static readonly PRIORITIES = MAX_PRIORITY + 1;
  readonly name: string;
  /**
   * Lanes by priority, made on first use: most queues use one or two priorities, and a queue kept
   * only for its ended counts holds none (a lane is two maps and a list).
   */
  readonly #lanes: (Lane | undefined)[] = [];
  /** Pending tasks of the queue (ready, delayed or parked). */
  pending = 0;
  readonly ended = { completed: 0, failed: 0, cancelled: 0 };

  constructor(name: string) {
    this.name = name;
  }

  /** The lane of priority `p`, or undefined when no task of that priority was ever added. */
  laneAt(p: number): Lane | undefined {
    return this.#lanes[p];
  }

  /** The lane of priority `p`, made when it has none. */
  lane(p: number): Lane {
    if (!Number.isInteger(p) || p < 0 || p >= QueueLanes.PRIORITIES) throw new RangeError(`no lane ${p}`);
    return (this.#lanes[p] ??= new Lane());
  }

  /** Nothing pending and nothing ended is counted: the index forgets the queue. */
  get isEmpty(): boolean {
    return this.pending === 0 && this.ended.completed + this.ended.failed + this.ended.cancelled === 0;
  }
}

export interface DueEntry {
  readonly atMs: number;
  readonly taskId: string;
  readonly gen: number;
}

/** A binary min-heap of delayed tasks by due time; stale entries are skipped lazily. */
export class DueHeap {
  readonly #items: DueEntry[] = [];

  get size(): number {
    return this.#items.length;
  }

  clear(): void {
    this.#items.length = 0;
  }

  peek(): DueEntry | undefined {
    return this.#items[0];
  }

  push(entry: DueEntry): void {
    const items = this.#items;
    items.push(entry);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const p = items[parent];
      if (p === undefined || p.atMs <= entry.atMs) break;
      items[i] = p;
      i = parent;
    }
    items[i] = entry;
  }

  pop(): DueEntry | undefined {
    const items = this.#items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      let smallestAt = last.atMs;
      const left = items[l];
      const right = items[r];
      if (left !== undefined && left.atMs < smallestAt) {
        smallest = l;
        smallestAt = left.atMs;
      }
      if (right !== undefined && right.atMs < smallestAt) smallest = r;
      if (smallest === i) break;
      const child = items[smallest];
      if (child === undefined) break;
      items[i] = child;
      i = smallest;
    }
    items[i] = last;
    return top;
  }
}
