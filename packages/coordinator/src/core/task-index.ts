/**
 * The in-memory index of pending tasks, ended tasks and current owners, so an acquire never scans
 * etcd and retention never reads what it removes.
 *
 * Lean by design (≤ 1 KiB per pending task, measured by bench/src/scale-index.ts): per pending task
 * one entry with what selection and expiry need — id, resource, queue (one shared string per queue),
 * priority, due time, status flags, create / mod revision — and the stored record's JSON as one string (the grant computes its write
 * from it without a read); per ended task its state, end time, revision and payload size (what
 * retention decides on); per owner key its {@link OwnerEntry}. Nothing else: no payload, no
 * history, no parsed record.
 *
 * It is fed by the watch on the tasks + owners prefixes (and reset from a range read on start or
 * after compaction). It is a *hint*: the grant transaction re-checks everything in etcd (owner
 * absent, task unchanged, session unchanged), so a stale index can only cost a failed compare.
 *
 * Holds: a resource being granted by this coordinator is held (skipped by {@link select}) until
 * the watch has caught up with the revision that settled it, so the next acquire does not race
 * its own in-flight grant.
 *
 * Lifecycle: a pending task is *ready* (grantable when its resource is free), *delayed* (its
 * `notBeforeMs` is in the future: kept in a heap by time, promoted when due — {@link nextDueMs}
 * tells the grant service when to {@link promoteDue}, so nothing polls), or *parked* (an attempt
 * is open, or its attempts are used up: it waits for the record that closes the attempt). Ready
 * tasks are kept per queue (issue 25), in one lane per priority; selection looks only at the queues
 * it is given (the session's), takes the highest priority first and, within a priority, lets the
 * queues take turns (the caller's `turn` rotates which queue goes first), oldest first within a
 * queue.
 *
 * Queues: a queue's lanes exist while it has pending tasks (or ended ones counted); its name is
 * kept once and shared by its entries. Every task that becomes grantable (a new ready task, a freed
 * resource, a due task promoted, a hold that ended) is noted for {@link takeReadied} with its queue,
 * so the grant service wakes only the long polls that serve the queue, and of those that wait for
 * one task id only the ones waiting for it.
 *
 * Over 400 lines on purpose: the lanes, the due heap, the per-resource ids and the owners block and
 * unblock each other (an owner key blocks its resource's ready tasks, its delete returns them in
 * create order, a due task enters a lane only if its resource is free), and those moves are kept in
 * one class so each invariant is visible in one place. The pieces that stand alone are their own
 * files: entries (index-entry.ts), lanes and heap (index-queues.ts), owners and holds
 * (index-owners.ts).
 */

import { DEFAULT_QUEUE, DEFAULT_RETRY_POLICY, type RetryPolicy } from '@leasehold/protocol';
import { PendingEntry, type EndedTask, type PendingTask, type Status, type TaskEntry } from './index-entry.js';
import { OwnerTable, type OwnerEntry } from './index-owners.js';
import { DueHeap, QueueLanes, type Lane } from './index-queues.js';

export type { OwnerEntry } from './index-owners.js';

export {
  entryOf,
  recordOf,
  traceparentOf,
  type EndedTask,
  type IndexInput,
  type PendingTask,
  type TaskEntry,
} from './index-entry.js';

export interface SelectOptions {
  /** Only this task (if it is eligible and in one of `queues`). */
  readonly taskId?: string;
  readonly limit?: number;
  /** The queues to select from (a session's). Default: `default` only. */
  readonly queues?: readonly string[];
  /** Which of `queues` goes first within a priority (taken modulo their count): callers rotate it. */
  readonly turn?: number;
  /**
   * Resources this coordinator is assigned (core/peers.ts), preferred within a priority: of the
   * first {@link PREFER_WINDOW} grantable tasks of that priority the oldest preferred one is
   * taken, else the one `select` would take without it. Only with `limit` 1.
   */
  readonly prefer?: (resource: string) => boolean;
}

/**
 * How many grantable tasks of one priority a preferring select looks at. A peer's tasks that wait
 * ahead of this coordinator's own are at most this many per priority before it takes them too
 * (their own coordinator takes them first when its workers ask), so a busy or workerless peer
 * delays a task by a bounded count of grants, never for good.
 */
export const PREFER_WINDOW = 32;

/** Queues noted as readied before {@link TaskIndex.takeReadied} answers 'all' instead of a set. */
export const MAX_READIED_QUEUES = 256;
/** Task ids noted as readied before {@link TaskIndex.takeReadied} answers 'all' for the tasks. */
export const MAX_READIED_TASKS = 1024;

/**
 * What became grantable since {@link TaskIndex.takeReadied} last answered: the queues, and the task
 * ids ('all': everything may have, after a reset or past the bound). `tasks` may be 'all' while
 * `queues` is a set: then every task of those queues may have.
 */
export interface Readied {
  readonly queues: ReadonlySet<string> | 'all';
  readonly tasks: ReadonlySet<string> | 'all';
}

/** Tasks of one queue by state, as the metrics, `leasehold status` and the console count them. */
export interface QueueCounts {
  /** Ready: grantable once its resource is free. */
  pending: number;
  delayed: number;
  /** Its attempt open and its owner key present. */
  leased: number;
  completed: number;
  failed: number;
  cancelled: number;
}

/** A pending task with the index's own bookkeeping (arrival sequence, status, heap generation). */
type Entry = PendingEntry;

/** The entry object of a pending task given to the index (made by {@link entryOf}). */
function entryOfPending(task: PendingTask): Entry {
  if (!(task instanceof PendingEntry)) throw new TypeError('pending tasks are made by entryOf');
  return task;
}

export interface TaskIndexOptions {
  /**
   * Wall clock (epoch ms) against which `notBeforeMs` is judged (the services pass theirs). Default:
   * time 0, before any stored time — every task with a `notBeforeMs` is delayed.
   */
  readonly wallClock?: () => number;
  /** The installation's retry policy (for records that carry none). */
  readonly defaults?: RetryPolicy;
}

/** Counts of ended tasks by state. */
export interface EndedCounts {
  completed: number;
  failed: number;
  cancelled: number;
}

/**
 * Pending tasks are kept so that {@link TaskIndex.select} never walks past tasks whose resource is
 * owned (a queue with thousands of leased tasks at its head would otherwise cost a scan per
 * acquire): per priority lane, `queue` holds the ready free tasks that were never blocked, in
 * arrival order (tasks arrive in revision order; a batch submit creates many at one revision, in op
 * order); `returned` the ready free tasks that were blocked by an owner (or delayed) and freed
 * again, sorted the same way; tasks of an owned resource, delayed and parked tasks are in neither.
 * Selection merges the two, lane by lane. Order = (priority desc, create_revision, arrival seq).
 */
export class TaskIndex {
  readonly #now: () => number;
  readonly #defaults: RetryPolicy;
  /** Every pending task, by task id. */
  #pending = new Map<string, Entry>();
  #nextSeq = 0;
  /** Pending task ids per resource: one id as a string (the usual case), several as a set. */
  #byResource = new Map<string, string | Set<string>>();
  /** Lanes and counts per queue name. */
  #queues = new Map<string, QueueLanes>();
  /** Queues that gained a grantable task since {@link takeReadied} last answered. */
  #readied: Set<string> | 'all' = new Set();
  /** The tasks that became grantable since then. */
  #readiedTasks: Set<string> | 'all' = new Set();
  readonly #due = new DueHeap();
  #gen = 0;
  /** Every ended task, by task id. */
  #ended = new Map<string, EndedTask>();
  #endedCounts: EndedCounts = { completed: 0, failed: 0, cancelled: 0 };
  readonly #owners = new OwnerTable();
  #revision = 0n;

  constructor(options: TaskIndexOptions = {}) {
    this.#now = options.wallClock ?? (() => 0);
    this.#defaults = options.defaults ?? DEFAULT_RETRY_POLICY;
  }

  /** The installation's retry policy (for records that carry none). */
  get defaults(): RetryPolicy {
    return this.#defaults;
  }

  /** Revision the index reflects (everything up to and including it). */
  get revision(): bigint {
    return this.#revision;
  }

  /** Replace everything with a snapshot read at `revision`. Holds survive. */
  reset(tasks: readonly TaskEntry[], owners: readonly OwnerEntry[], revision: bigint): void {
    this.#pending = new Map();
    this.#byResource = new Map();
    this.#queues = new Map();
    this.#readied = 'all';
    this.#readiedTasks = 'all';
    this.#due.clear();
    this.#ended = new Map();
    this.#endedCounts = { completed: 0, failed: 0, cancelled: 0 };
    this.#owners.reset();
    for (const owner of owners) this.#setOwner(owner);
    const pending: PendingTask[] = [];
    for (const task of tasks) {
      if (task.state === 'pending') pending.push(task);
      else this.#setEnded(task);
    }
    pending.sort((a, b) => (a.createRevision < b.createRevision ? -1 : a.createRevision > b.createRevision ? 1 : 0));
    for (const task of pending) this.#addTask(task, this.#nextSeq++);
    this.#revision = revision;
  }

  /** A task key changed (or was deleted: undefined): pending tasks are indexed, ended ones counted. */
  applyTask(taskId: string, entry: TaskEntry | undefined): void {
    const known = this.#pending.get(taskId);
    const pending = entry?.state === 'pending' ? entry : undefined;
    this.#setEnded(entry !== undefined && entry.state !== 'pending' ? entry : undefined, taskId);
    if (known === undefined) {
      if (pending !== undefined) this.#addTask(pending, this.#nextSeq++);
      return;
    }
    if (pending === undefined || pending.resource !== known.resource || pending.queue !== known.queue) {
      this.#removeTask(known);
      if (pending !== undefined) this.#addTask(pending, this.#nextSeq++);
      return;
    }
    const status = this.#statusOf(pending);
    if (status === known.status && status !== 'delayed' && pending.priority === known.priority) {
      // Same task, same place: replace the entry where it sits.
      const replaced = entryOfPending(pending);
      replaced.queue = known.queue;
      replaced.seq = known.seq;
      replaced.status = status;
      replaced.dueGen = known.dueGen;
      this.#pending.set(taskId, replaced);
      const lane = this.#laneOf(replaced);
      if (lane.queue.has(taskId)) lane.queue.set(taskId, replaced);
      return;
    }
    // Its place changes (an attempt opened or closed, a backoff, another priority): move it,
    // keeping its arrival sequence.
    const seq = known.seq;
    this.#removeTask(known);
    this.#addTask(pending, seq);
  }

  /**
   * This coordinator rewrote a pending task's record itself, over the one of mod_revision `from`
   * (its txn compared it): apply the new entry now instead of when the watch says so (a takeover
   * need not wait for the watch). Skipped, false, when the index holds another revision of the task
   * by now (the watch was faster): the watch's own event for the write is then, or will be, applied.
   */
  applyOwnWrite(entry: TaskEntry, from: bigint): boolean {
    if (this.#pending.get(entry.taskId)?.modRevision !== from) return false;
    this.applyTask(entry.taskId, entry);
    return true;
  }

  /**
   * This coordinator deleted task `taskId` itself (a purge or a retention sweep), its txn comparing
   * mod_revision `from`: forget the task now instead of when the watch says so, so the next purge
   * planned from this index does not pick it again. Skipped, false, when the index holds another
   * revision of the task by now (the watch was faster; its events are, or will be, applied).
   */
  applyOwnDelete(taskId: string, from: bigint): boolean {
    const known = this.#ended.get(taskId) ?? this.#pending.get(taskId);
    if (known?.modRevision !== from) return false;
    this.applyTask(taskId, undefined);
    return true;
  }

  applyOwner(resource: string, owner: OwnerEntry | undefined): void {
    if (owner === undefined) this.#deleteOwner(resource);
    else this.#setOwner(owner);
  }

  /**
   * This coordinator deleted `resource`'s owner key (token `token`) at `revision` itself: free it
   * now instead of when the watch says so (a takeover need not wait for the watch). Until the watch
   * reaches `revision`, {@link previousOwner} still answers with the entry, so the watch's delete
   * event can tell whose key it was.
   */
  freeOwner(resource: string, token: bigint, revision: bigint): OwnerEntry | undefined {
    const owner = this.#owners.get(resource);
    if (owner?.token !== token) return undefined;
    this.#deleteOwner(resource);
    if (revision > this.#revision) this.#owners.freedEarly(owner, revision);
    return owner;
  }

  /** The owner entry of `resource` before the watch event being applied: current or freed early. */
  previousOwner(resource: string): OwnerEntry | undefined {
    return this.#owners.previous(resource);
  }

  /** The watch has delivered everything up to `revision`. */
  advanceTo(revision: bigint): void {
    if (revision <= this.#revision) return;
    this.#revision = revision;
    for (const resource of this.#owners.seen(revision)) this.#readyAgain(resource);
  }

  hold(resource: string): void {
    this.#owners.hold(resource);
  }

  /** Keep holding `resource` until the index has seen `revision`. */
  holdUntil(resource: string, revision: bigint): void {
    if (this.#owners.holdUntil(resource, revision, this.#revision)) this.#readyAgain(resource);
  }

  /**
   * The queues that gained a grantable task since the last call, and those tasks ('all': after a
   * reset, or more than {@link MAX_READIED_QUEUES} queues / {@link MAX_READIED_TASKS} tasks), and
   * forget them.
   */
  takeReadied(): Readied {
    const readied = { queues: this.#readied, tasks: this.#readiedTasks };
    this.#readied = new Set();
    this.#readiedTasks = new Set();
    return readied;
  }

  /**
   * Delayed tasks whose time has come become ready, and their queues readied (as {@link select}
   * does first): the grant service calls it when {@link nextDueMs} comes.
   */
  promoteDue(): void {
    this.#promoteDue();
  }

  isHeld(resource: string): boolean {
    return this.#owners.isHeld(resource, this.#revision);
  }

  ownerOf(resource: string): OwnerEntry | undefined {
    return this.#owners.get(resource);
  }

  /** Owner keys of `sessionId` as the index knows them (complete up to {@link revision}). */
  ownersOf(sessionId: string): OwnerEntry[] {
    return this.#owners.ofSession(sessionId);
  }

  pendingTask(taskId: string): PendingTask | undefined {
    return this.#pending.get(taskId);
  }

  /** The ended task `taskId`, if the index knows it as ended. */
  endedTask(taskId: string): EndedTask | undefined {
    return this.#ended.get(taskId);
  }

  /** Every ended task the index knows (retention decides on them). */
  endedTasks(): IterableIterator<EndedTask> {
    return this.#ended.values();
  }

  /**
   * Grantable tasks whose resource has no owner and is not held — highest priority first, oldest
   * first within a priority — at most one per resource. Delayed tasks whose time has come are
   * promoted first.
   */
  select(options: SelectOptions = {}): PendingTask[] {
    this.#promoteDue();
    const limit = options.limit ?? 1;
    const names = options.queues ?? [DEFAULT_QUEUE];
    if (options.taskId !== undefined) {
      const task = this.#pending.get(options.taskId);
      return task !== undefined && names.includes(task.queue) && this.#eligible(task) ? [task] : [];
    }
    const served: QueueLanes[] = [];
    for (const name of names) {
      const lanes = this.#queues.get(name);
      if (lanes !== undefined && lanes.pending > 0 && !served.includes(lanes)) served.push(lanes);
    }
    if (served.length === 0) return [];
    const first = (options.turn ?? 0) % served.length;
    if (options.prefer !== undefined && limit === 1) return this.#selectPreferring(served, first, options.prefer);
    const picked: PendingTask[] = [];
    const resources = new Set<string>();
    for (let p = QueueLanes.PRIORITIES - 1; p >= 0 && picked.length < limit; p -= 1) {
      for (let k = 0; k < served.length && picked.length < limit; k += 1) {
        const lane = served[(first + k) % served.length]?.laneAt(p);
        if (lane !== undefined) this.#pickFrom(lane, limit, picked, resources);
      }
    }
    return picked;
  }

  /** Ready tasks of one lane, oldest first, whose resource is free, into `picked` (up to `limit`). */
  #pickFrom(lane: Lane, limit: number, picked: PendingTask[], resources: Set<string>): void {
    this.#eachGrantable(lane, (task) => {
      if (resources.has(task.resource)) return false;
      resources.add(task.resource);
      picked.push(task);
      return picked.length >= limit;
    });
  }

  /**
   * Within each priority (highest first): the oldest grantable task of a preferred resource among
   * the first {@link PREFER_WINDOW} grantable ones (queues in turn order), else the first grantable
   * one — what the plain select takes. Priority order is kept exactly; within a priority a task
   * is the oldest grantable one of its resource either way (all tasks of a resource are assigned
   * alike), so a resource's tasks are still granted in their order.
   */
  #selectPreferring(
    served: readonly QueueLanes[],
    first: number,
    prefer: (resource: string) => boolean,
  ): PendingTask[] {
    for (let p = QueueLanes.PRIORITIES - 1; p >= 0; p -= 1) {
      let fallback: Entry | undefined;
      let preferred: Entry | undefined;
      let looked = 0;
      for (let k = 0; k < served.length && preferred === undefined && looked < PREFER_WINDOW; k += 1) {
        const lane = served[(first + k) % served.length]?.laneAt(p);
        if (lane === undefined) continue;
        this.#eachGrantable(lane, (task) => {
          fallback ??= task;
          looked += 1;
          if (prefer(task.resource)) preferred = task;
          return preferred !== undefined || looked >= PREFER_WINDOW;
        });
      }
      const task = preferred ?? fallback;
      if (task !== undefined) return [task];
    }
    return [];
  }

  /** Each ready task of one lane whose resource is free, oldest first, until `visit` says stop. */
  #eachGrantable(lane: Lane, visit: (task: Entry) => boolean): void {
    if (lane.queue.size === 0 && lane.returned.empty) return;
    const queue = lane.queue.values();
    let q = queue.next();
    let r = lane.returned.liveAt(0);
    for (;;) {
      const fromQueue = q.done === true ? undefined : q.value;
      let task: Entry | undefined;
      if (fromQueue !== undefined && (r === undefined || this.#before(fromQueue, r.revision, r.seq))) {
        task = fromQueue;
        q = queue.next();
      } else if (r !== undefined) {
        task = this.#pending.get(r.taskId);
        r = lane.returned.liveAt(r.next);
      } else {
        return;
      }
      if (task === undefined || this.isHeld(task.resource)) continue;
      if (visit(task)) return;
    }
  }

  /**
   * When the earliest delayed task becomes due (epoch ms), if any is waiting — possibly a time
   * already past: this does not promote (only {@link select} and {@link promoteDue} do), so a task
   * that came due after the caller's last select is still reported, and the caller promotes it at
   * once instead of waiting past it for a change that will not come.
   */
  nextDueMs(): number | undefined {
    return this.#earliestDue();
  }

  /** Due time of the earliest delayed task (entries no task holds any more are dropped on the way). */
  #earliestDue(): number | undefined {
    for (;;) {
      const top = this.#due.peek();
      if (top === undefined) return undefined;
      if (this.#pending.get(top.taskId)?.dueGen === top.gen) return top.atMs;
      this.#due.pop();
    }
  }

  /**
   * Pending tasks with an open attempt whose owner key is gone (a lost lease nobody has recorded):
   * `open` is set by the grant, whose revision — the task key's mod_revision — is the attempt's
   * token, and no owner key with that token exists. (Also {@link isLost}'s exhausted records.)
   */
  lostAttempts(): PendingTask[] {
    const lost: PendingTask[] = [];
    for (const task of this.#pending.values()) {
      if (task.status === 'parked' && this.isLost(task)) lost.push(task);
    }
    return lost;
  }

  /**
   * Is `task` stuck: its open attempt over without a record of it (its owner key is gone), or (a
   * record of an older coordinator) no attempt open and none left?
   */
  isLost(task: PendingTask): boolean {
    if (!task.open) return task.exhausted;
    return this.#owners.get(task.resource)?.token !== task.modRevision;
  }

  stats(): {
    readonly pending: number;
    readonly delayed: number;
    readonly parked: number;
    readonly owned: number;
    readonly held: number;
    readonly ended: Readonly<EndedCounts>;
  } {
    let delayed = 0;
    let parked = 0;
    for (const task of this.#pending.values()) {
      if (task.status === 'delayed') delayed += 1;
      else if (task.status === 'parked') parked += 1;
    }
    return {
      pending: this.#pending.size,
      delayed,
      parked,
      owned: this.#owners.size,
      held: this.#owners.heldCount,
      ended: { ...this.#endedCounts },
    };
  }

  /**
   * Counts per queue: ready (grantable once free), delayed, leased (attempt open, owner key present)
   * and ended by state; `default` always (zeros when it has no task). One pass over the pending
   * tasks (a scrape's cost, as {@link stats}).
   */
  queueCounts(): Map<string, QueueCounts> {
    const counts = new Map<string, QueueCounts>([
      [DEFAULT_QUEUE, { pending: 0, delayed: 0, leased: 0, completed: 0, failed: 0, cancelled: 0 }],
    ]);
    for (const [name, lanes] of this.#queues) {
      counts.set(name, { pending: 0, delayed: 0, leased: 0, ...lanes.ended });
    }
    for (const task of this.#pending.values()) {
      const c = counts.get(task.queue);
      if (c === undefined) continue;
      if (task.status === 'ready') c.pending += 1;
      else if (task.status === 'delayed') c.delayed += 1;
      else if (task.open && this.#owners.get(task.resource)?.taskId === task.taskId) c.leased += 1;
    }
    return counts;
  }

  #setEnded(task: EndedTask | undefined, taskId = task?.taskId): void {
    if (taskId === undefined) return;
    const before = this.#ended.get(taskId);
    if (before !== undefined) {
      this.#endedCounts[before.state] -= 1;
      const lanes = this.#queues.get(before.queue);
      if (lanes !== undefined) {
        lanes.ended[before.state] -= 1;
        this.#dropIfEmpty(lanes);
      }
    }
    if (task === undefined) {
      if (before !== undefined) this.#ended.delete(taskId);
      return;
    }
    const lanes = this.#lanesOf(task.queue);
    task.queue = lanes.name;
    lanes.ended[task.state] += 1;
    this.#ended.set(taskId, task);
    this.#endedCounts[task.state] += 1;
  }

  /** The lanes of queue `name`, made when it has none (its name kept once, shared by its entries). */
  #lanesOf(name: string): QueueLanes {
    let lanes = this.#queues.get(name);
    if (lanes === undefined) this.#queues.set(name, (lanes = new QueueLanes(name)));
    return lanes;
  }

  #dropIfEmpty(lanes: QueueLanes): void {
    if (lanes.isEmpty) this.#queues.delete(lanes.name);
  }

  /** `task` became grantable: the long polls serving its queue, or waiting for it, may select again. */
  #markReadied(task: Entry): void {
    if (this.#readiedTasks !== 'all') {
      this.#readiedTasks.add(task.taskId);
      if (this.#readiedTasks.size > MAX_READIED_TASKS) this.#readiedTasks = 'all';
    }
    if (this.#readied === 'all') return;
    this.#readied.add(task.queue);
    if (this.#readied.size > MAX_READIED_QUEUES) this.#readied = 'all';
  }

  /** `resource`'s hold ended: its free ready tasks are grantable again. */
  #readyAgain(resource: string): void {
    if (this.#owners.has(resource)) return;
    for (const taskId of this.#idsOf(resource)) {
      const task = this.#pending.get(taskId);
      if (task?.status === 'ready') this.#markReadied(task);
    }
  }

  #statusOf(task: PendingTask): Status {
    if (task.open || task.exhausted || task.legacy) return 'parked';
    return task.dueMs > this.#now() ? 'delayed' : 'ready';
  }

  #laneOf(task: PendingTask): Lane {
    const lanes = this.#queues.get(task.queue);
    if (lanes === undefined) throw new RangeError('no lanes');
    return lanes.lane(task.priority);
  }

  #eligible(task: Entry): boolean {
    return task.status === 'ready' && !this.#owners.has(task.resource) && !this.isHeld(task.resource);
  }

  /** Delayed tasks whose time has come become ready (their queues readied, when their resource is free). */
  #promoteDue(): void {
    if (this.#due.size === 0) return;
    const now = this.#now();
    for (let top = this.#due.peek(); top !== undefined && top.atMs <= now; top = this.#due.peek()) {
      this.#due.pop();
      const task = this.#pending.get(top.taskId);
      if (task?.dueGen !== top.gen || task.status !== 'delayed') continue;
      task.status = 'ready';
      task.dueGen = 0;
      if (!this.#owners.has(task.resource)) this.#insertReturned(task);
    }
  }

  #idsOf(resource: string): Iterable<string> {
    const ids = this.#byResource.get(resource);
    return ids === undefined ? [] : typeof ids === 'string' ? [ids] : ids;
  }

  #addTask(pending: PendingTask, seq: number): void {
    const status = this.#statusOf(pending);
    const task = entryOfPending(pending);
    const lanes = this.#lanesOf(task.queue);
    task.queue = lanes.name;
    lanes.pending += 1;
    task.seq = seq;
    task.status = status;
    task.dueGen = 0;
    this.#pending.set(task.taskId, task);
    const ids = this.#byResource.get(task.resource);
    if (ids === undefined) this.#byResource.set(task.resource, task.taskId);
    else if (typeof ids === 'string') {
      if (ids !== task.taskId) this.#byResource.set(task.resource, new Set([ids, task.taskId]));
    } else ids.add(task.taskId);
    if (status === 'delayed') {
      // Nothing is readied: it becomes grantable when promoted (its queue readied then).
      task.dueGen = ++this.#gen;
      this.#due.push({ atMs: task.dueMs, taskId: task.taskId, gen: task.dueGen });
      return;
    }
    if (status === 'parked' || this.#owners.has(task.resource)) return;
    this.#laneOf(task).add(task);
    this.#markReadied(task);
  }

  #removeTask(task: Entry): void {
    if (task.status === 'ready') this.#laneOf(task).remove(task.taskId);
    task.dueGen = 0;
    this.#pending.delete(task.taskId);
    const lanes = this.#queues.get(task.queue);
    if (lanes !== undefined) {
      lanes.pending -= 1;
      this.#dropIfEmpty(lanes);
    }
    const ids = this.#byResource.get(task.resource);
    if (ids === task.taskId) this.#byResource.delete(task.resource);
    else if (typeof ids === 'object') {
      ids.delete(task.taskId);
      if (ids.size === 1) this.#byResource.set(task.resource, [...ids][0] ?? task.taskId);
    }
  }

  #setOwner(owner: OwnerEntry): void {
    if (!this.#owners.set(owner)) return;
    // The resource's ready tasks are blocked now.
    for (const taskId of this.#idsOf(owner.resource)) {
      const task = this.#pending.get(taskId);
      if (task?.status === 'ready') this.#laneOf(task).remove(taskId);
    }
  }

  #deleteOwner(resource: string): void {
    if (this.#owners.delete(resource) === undefined) return;
    // The resource's ready tasks are free again, in create order among the returned ones.
    for (const taskId of this.#idsOf(resource)) {
      const task = this.#pending.get(taskId);
      if (task?.status === 'ready') this.#insertReturned(task);
    }
  }

  /** Does `a` come before the task ordered (revision, seq)? */
  #before(a: Entry, revision: bigint, seq: number): boolean {
    if (a.createRevision !== revision) return a.createRevision < revision;
    return a.seq < seq;
  }

  #insertReturned(task: Entry): void {
    this.#laneOf(task).returned.insert(task.taskId, task.createRevision, task.seq);
    this.#markReadied(task);
  }
}
