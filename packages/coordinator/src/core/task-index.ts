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

export class TaskIndex {
  #pending = new Map<string, PendingTask>();
  #owners = new Map<string, OwnerEntry>();
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
    const sorted = [...tasks].sort((a, b) => (a.createRevision < b.createRevision ? -1 : 1));
    this.#pending = new Map(sorted.map((t) => [t.taskId, t]));
    this.#owners = new Map(owners.map((o) => [o.resource, o]));
    this.#freedEarly.clear();
    this.#revision = revision;
  }

  /** A task key changed: pending tasks are indexed, anything else (or a delete) drops it. */
  applyTask(taskId: string, pending: PendingTask | undefined): void {
    if (pending === undefined) this.#pending.delete(taskId);
    else this.#pending.set(taskId, pending);
  }

  applyOwner(resource: string, owner: OwnerEntry | undefined): void {
    if (owner === undefined) this.#owners.delete(resource);
    else this.#owners.set(resource, owner);
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
    this.#owners.delete(resource);
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
    for (const owner of this.#owners.values()) if (owner.sessionId === sessionId) held.push(owner);
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
    for (const task of this.#pending.values()) {
      if (picked.length >= limit) break;
      if (resources.has(task.resource) || !this.#eligible(task)) continue;
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
}
