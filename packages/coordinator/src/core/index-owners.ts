/**
 * The owner keys of the task index (`task-index.ts`): who holds which resource, per session, the
 * owners this coordinator freed ahead of the watch, and the holds on resources being granted here.
 * Pure bookkeeping; the index unblocks and blocks the resource's tasks around it.
 */

export interface OwnerEntry {
  readonly resource: string;
  readonly taskId: string;
  readonly sessionId: string;
  /** The acquire's request id: names the grant's holding key. */
  readonly requestId: string;
  /** The owner key's create_revision: the fencing token. */
  readonly token: bigint;
}

/** `until === undefined`: held until released explicitly. */
interface Hold {
  until: bigint | undefined;
}

export class OwnerTable {
  #owners = new Map<string, OwnerEntry>();
  /** Resources by the session whose owner keys they are. */
  #bySession = new Map<string, Set<string>>();
  readonly #holds = new Map<string, Hold>();
  /** Owners this coordinator deleted itself, until the watch reaches the deletion revision. */
  readonly #freedEarly = new Map<string, { readonly owner: OwnerEntry; readonly at: bigint }>();

  /** Forget every owner (a snapshot follows). Holds survive. */
  reset(): void {
    this.#owners = new Map();
    this.#bySession = new Map();
    this.#freedEarly.clear();
  }

  get(resource: string): OwnerEntry | undefined {
    return this.#owners.get(resource);
  }

  has(resource: string): boolean {
    return this.#owners.has(resource);
  }

  get size(): number {
    return this.#owners.size;
  }

  /** Record `owner`; true when the resource had no owner before (its tasks are blocked now). */
  set(owner: OwnerEntry): boolean {
    const before = this.#owners.get(owner.resource);
    if (before !== undefined) this.#bySession.get(before.sessionId)?.delete(owner.resource);
    this.#owners.set(owner.resource, owner);
    let resources = this.#bySession.get(owner.sessionId);
    if (resources === undefined) this.#bySession.set(owner.sessionId, (resources = new Set()));
    resources.add(owner.resource);
    return before === undefined;
  }

  /** Forget `resource`'s owner; the entry removed (undefined: none, nothing changed). */
  delete(resource: string): OwnerEntry | undefined {
    const owner = this.#owners.get(resource);
    if (owner === undefined) return undefined;
    this.#owners.delete(resource);
    const resources = this.#bySession.get(owner.sessionId);
    resources?.delete(resource);
    if (resources?.size === 0) this.#bySession.delete(owner.sessionId);
    return owner;
  }

  /** Owner keys of `sessionId`. */
  ofSession(sessionId: string): OwnerEntry[] {
    const held: OwnerEntry[] = [];
    for (const resource of this.#bySession.get(sessionId) ?? []) {
      const owner = this.#owners.get(resource);
      if (owner !== undefined) held.push(owner);
    }
    return held;
  }

  /** Remember `owner`, deleted by this coordinator at `at`, until the watch reaches `at`. */
  freedEarly(owner: OwnerEntry, at: bigint): void {
    this.#freedEarly.set(owner.resource, { owner, at });
  }

  /** The owner before the watch event being applied: current, or freed early. */
  previous(resource: string): OwnerEntry | undefined {
    return this.#owners.get(resource) ?? this.#freedEarly.get(resource)?.owner;
  }

  /**
   * The watch has delivered everything up to `revision`: early frees it covers are done, and so are
   * the holds that waited for it. Returns the resources whose holds ended (their free tasks may be
   * granted again: the index wakes their queues).
   */
  seen(revision: bigint): string[] {
    for (const [resource, freed] of this.#freedEarly) if (freed.at <= revision) this.#freedEarly.delete(resource);
    const released: string[] = [];
    for (const [resource, hold] of this.#holds) {
      if (hold.until !== undefined && hold.until <= revision) {
        this.#holds.delete(resource);
        released.push(resource);
      }
    }
    return released;
  }

  /** Resources held now (granted here, the watch not caught up yet). */
  get heldCount(): number {
    return this.#holds.size;
  }

  hold(resource: string): void {
    this.#holds.set(resource, { until: undefined });
  }

  /**
   * Keep holding `resource` until the index has seen `revision` (`indexRevision`: what it has).
   * True when the hold ended now.
   */
  holdUntil(resource: string, revision: bigint, indexRevision: bigint): boolean {
    if (revision <= indexRevision) return this.#holds.delete(resource);
    this.#holds.set(resource, { until: revision });
    return false;
  }

  isHeld(resource: string, indexRevision: bigint): boolean {
    const hold = this.#holds.get(resource);
    if (hold === undefined) return false;
    if (hold.until !== undefined && hold.until <= indexRevision) {
      this.#holds.delete(resource);
      return false;
    }
    return true;
  }
}
