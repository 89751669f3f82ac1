/**
 * The in-memory index of pending tasks and current owners, so an acquire never scans etcd.
 *
 * It is fed by the watch on the tasks + owners prefixes (and reset from a range read on start or
 * after compaction). It is a *hint*: the grant transaction re-checks everything in etcd (owner
 * absent, task unchanged, session unchanged), so a stale index can only cost a failed compare.
 *
 * Holds: a resource being granted by this coordinator is held (skipped by {@link select}) until
 * the watch has caught up with the revision that settled it, so the next acquire does not race
 * its own in-flight grant.
 */

import type { TaskRecord } from './records.js';

export interface PendingTask {
  readonly taskId: string;
  readonly resource: string;
  /** create_revision of the task key: selection is FIFO by it. */
  readonly createRevision: bigint;
  /** mod_revision of the task key as last seen. */
  readonly modRevision: bigint;
  /**
   * The task record at `modRevision`. A grant uses it without re-reading etcd: the grant txn
   * compares the task key's mod_revision with `modRevision`, so a stale record only fails it.
   */
  readonly record: TaskRecord;
}

export interface OwnerEntry {
  readonly resource: string;
  readonly taskId: string;
  readonly sessionId: string;
  /** The acquire's request id: names the grant's holding key. */
  readonly requestId: string;
  /** The owner key's create_revision: the fencing token. */
  readonly token: bigint;
}

export interface SelectOptions {
  /** Only this task (if it is eligible). */
  readonly taskId?: string;
  readonly limit?: number;
}

/** `until === undefined`: held until released explicitly. */
interface Hold {
  until: bigint | undefined;
}

/**
 * Free tasks that were blocked by an owner and freed again, sorted by (create_revision, arrival
 * sequence). Removal is lazy (O(1): the entry is marked dead and skipped), so re-granting thousands
 * of freed tasks costs no array shifting; dead entries are dropped from the front as selection
 * passes them and compacted away when they outnumber the live ones.
 */
class ReturnedList {
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

/**
 * Pending tasks are kept so that {@link TaskIndex.select} never walks past tasks whose resource is
 * owned (a queue with thousands of leased tasks at its head would otherwise cost a scan per
 * acquire): `#queue` holds the free tasks that were never blocked, in arrival order (tasks arrive
 * in revision order; a batch submit creates many at one revision, in op order); `#returned` the
 * free tasks that were blocked by an owner and freed again, sorted the same way; tasks of an owned
 * resource are in neither. Selection merges the two. Order = (create_revision, arrival sequence).
 */
export class TaskIndex {
  /** Every pending task, by task id. */
  #pending = new Map<string, PendingTask>();
  /** Arrival sequence of every pending task: breaks create_revision ties (one txn, many tasks). */
  #seq = new Map<string, number>();
  #nextSeq = 0;
  /** Pending task ids per resource. */
  #byResource = new Map<string, Set<string>>();
  #queue = new Map<string, PendingTask>();
  readonly #returned = new ReturnedList();
  /** Order key of the last task appended to `#queue`. */
  #queuedUpTo: { revision: bigint; seq: number } = { revision: -1n, seq: -1 };
  #owners = new Map<string, OwnerEntry>();
  /** Owned resources per session id. */
  #bySession = new Map<string, Set<string>>();
  readonly #holds = new Map<string, Hold>();
  /** Owner entries freed ahead of the watch ({@link freeOwner}), until the watch reaches `at`. */
  readonly #freedEarly = new Map<string, { readonly owner: OwnerEntry; readonly at: bigint }>();
  #revision = 0n;

  /** Revision the index reflects (everything up to and including it). */
  get revision(): bigint {
    return this.#revision;
  }

  /** Replace everything with a snapshot read at `revision`. Holds survive. */
  reset(tasks: readonly PendingTask[], owners: readonly OwnerEntry[], revision: bigint): void {
    this.#pending = new Map();
    this.#seq = new Map();
    this.#byResource = new Map();
    this.#queue = new Map();
    this.#returned.clear();
    this.#queuedUpTo = { revision: -1n, seq: -1 };
    this.#owners = new Map();
    this.#bySession = new Map();
    for (const owner of owners) this.#setOwner(owner);
    const sorted = [...tasks].sort((a, b) =>
      a.createRevision < b.createRevision ? -1 : a.createRevision > b.createRevision ? 1 : 0,
    );
    for (const task of sorted) this.#addTask(task);
    this.#freedEarly.clear();
    this.#revision = revision;
  }

  /** A task key changed: pending tasks are indexed, anything else (or a delete) drops it. */
  applyTask(taskId: string, pending: PendingTask | undefined): void {
    const known = this.#pending.get(taskId);
    if (known !== undefined && (pending === undefined || pending.resource !== known.resource)) {
      this.#removeTask(known);
    } else if (known !== undefined && pending !== undefined) {
      // Same task, newer record: replace it where it sits.
      this.#pending.set(taskId, pending);
      if (this.#queue.has(taskId)) this.#queue.set(taskId, pending);
      return;
    }
    if (pending !== undefined) this.#addTask(pending);
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
  freeOwner(resource: string, token: bigint, revision: bigint): void {
    const owner = this.#owners.get(resource);
    if (owner?.token !== token) return;
    this.#deleteOwner(resource);
    if (revision > this.#revision) this.#freedEarly.set(resource, { owner, at: revision });
  }

  /** The owner entry of `resource` before the watch event being applied: current or freed early. */
  previousOwner(resource: string): OwnerEntry | undefined {
    return this.#owners.get(resource) ?? this.#freedEarly.get(resource)?.owner;
  }

  /** The watch has delivered everything up to `revision`. */
  advanceTo(revision: bigint): void {
    if (revision <= this.#revision) return;
    this.#revision = revision;
    for (const [resource, freed] of this.#freedEarly) if (freed.at <= revision) this.#freedEarly.delete(resource);
  }

  hold(resource: string): void {
    this.#holds.set(resource, { until: undefined });
  }

  /** Keep holding `resource` until the index has seen `revision`. */
  holdUntil(resource: string, revision: bigint): void {
    if (revision <= this.#revision) this.#holds.delete(resource);
    else this.#holds.set(resource, { until: revision });
  }

  isHeld(resource: string): boolean {
    const hold = this.#holds.get(resource);
    if (hold === undefined) return false;
    if (hold.until !== undefined && hold.until <= this.#revision) {
      this.#holds.delete(resource);
      return false;
    }
    return true;
  }

  ownerOf(resource: string): OwnerEntry | undefined {
    return this.#owners.get(resource);
  }

  /** Owner keys of `sessionId` as the index knows them (complete up to {@link revision}). */
  ownersOf(sessionId: string): OwnerEntry[] {
    const held: OwnerEntry[] = [];
    for (const resource of this.#bySession.get(sessionId) ?? []) {
      const owner = this.#owners.get(resource);
      if (owner !== undefined) held.push(owner);
    }
    return held;
  }

  pendingTask(taskId: string): PendingTask | undefined {
    return this.#pending.get(taskId);
  }

  /**
   * Pending tasks whose resource has no owner and is not held, oldest first, at most one per
   * resource.
   */
  select(options: SelectOptions = {}): PendingTask[] {
    const limit = options.limit ?? 1;
    if (options.taskId !== undefined) {
      const task = this.#pending.get(options.taskId);
      return task !== undefined && this.#eligible(task) ? [task] : [];
    }
    const picked: PendingTask[] = [];
    const resources = new Set<string>();
    const queue = this.#queue.values();
    let q = queue.next();
    let r = this.#returned.liveAt(0);
    while (picked.length < limit) {
      const fromQueue = q.done === true ? undefined : q.value;
      let task: PendingTask | undefined;
      if (fromQueue !== undefined && (r === undefined || this.#before(fromQueue, r.revision, r.seq))) {
        task = fromQueue;
        q = queue.next();
      } else if (r !== undefined) {
        task = this.#pending.get(r.taskId);
        r = this.#returned.liveAt(r.next);
      } else {
        break;
      }
      if (task === undefined) continue;
      if (resources.has(task.resource) || this.isHeld(task.resource)) continue;
      resources.add(task.resource);
      picked.push(task);
    }
    return picked;
  }

  stats(): { readonly pending: number; readonly owned: number; readonly held: number } {
    return { pending: this.#pending.size, owned: this.#owners.size, held: this.#holds.size };
  }

  #eligible(task: PendingTask): boolean {
    return !this.#owners.has(task.resource) && !this.isHeld(task.resource);
  }

  #addTask(task: PendingTask): void {
    this.#pending.set(task.taskId, task);
    const seq = this.#nextSeq++;
    this.#seq.set(task.taskId, seq);
    let ids = this.#byResource.get(task.resource);
    if (ids === undefined) this.#byResource.set(task.resource, (ids = new Set()));
    ids.add(task.taskId);
    if (this.#owners.has(task.resource)) return;
    // New tasks arrive in create order, so appending keeps the queue sorted; anything older than
    // what was queued last (not expected) goes to the sorted returned list instead.
    const last = this.#queuedUpTo;
    if (task.createRevision > last.revision || (task.createRevision === last.revision && seq > last.seq)) {
      this.#queue.set(task.taskId, task);
      this.#queuedUpTo = { revision: task.createRevision, seq };
    } else {
      this.#insertReturned(task);
    }
  }

  #removeTask(task: PendingTask): void {
    if (!this.#queue.delete(task.taskId)) this.#returned.remove(task.taskId);
    this.#pending.delete(task.taskId);
    this.#seq.delete(task.taskId);
    const ids = this.#byResource.get(task.resource);
    ids?.delete(task.taskId);
    if (ids?.size === 0) this.#byResource.delete(task.resource);
  }

  #setOwner(owner: OwnerEntry): void {
    const before = this.#owners.get(owner.resource);
    if (before !== undefined) this.#bySession.get(before.sessionId)?.delete(owner.resource);
    this.#owners.set(owner.resource, owner);
    let resources = this.#bySession.get(owner.sessionId);
    if (resources === undefined) this.#bySession.set(owner.sessionId, (resources = new Set()));
    resources.add(owner.resource);
    if (before !== undefined) return;
    // The resource's pending tasks are blocked now.
    for (const taskId of this.#byResource.get(owner.resource) ?? []) {
      if (!this.#queue.delete(taskId)) this.#returned.remove(taskId);
    }
  }

  #deleteOwner(resource: string): void {
    const owner = this.#owners.get(resource);
    if (owner === undefined) return;
    this.#owners.delete(resource);
    const resources = this.#bySession.get(owner.sessionId);
    resources?.delete(resource);
    if (resources?.size === 0) this.#bySession.delete(owner.sessionId);
    // The resource's pending tasks are free again, in create order among the returned ones.
    for (const taskId of this.#byResource.get(resource) ?? []) {
      const task = this.#pending.get(taskId);
      if (task !== undefined) this.#insertReturned(task);
    }
  }

  /** Does `a` come before the task ordered (revision, seq)? */
  #before(a: PendingTask, revision: bigint, seq: number): boolean {
    if (a.createRevision !== revision) return a.createRevision < revision;
    return (this.#seq.get(a.taskId) ?? 0) < seq;
  }

  #insertReturned(task: PendingTask): void {
    this.#returned.insert(task.taskId, task.createRevision, this.#seq.get(task.taskId) ?? 0);
  }
}
