/**
 * Which coordinators serve sessions, and which of them each resource is assigned to — pure.
 *
 * Every coordinator watches every pending task. Left alone they all select the same oldest task
 * for their workers, their grant txns collide in etcd, and all but one fail (then retry one by
 * one): with three coordinators the cycle bench measured 1.2 single grant txns per task on top of
 * the batched ones, and the three together spent 3.9× the coordinator CPU per task of one.
 *
 * So a coordinator prefers the resources assigned to it: rendezvous hashing of the resource over
 * the coordinators that serve at least one session (the ones that can grant), learnt from the
 * session records in etcd (`coordinatorId`) — the snapshot at each index build and the watch
 * after. Only a preference, never a rule: the grant txn decides who gets a task, whatever each
 * coordinator believes, so a stale or partial view costs a retry, never safety. How the index
 * uses it (and why order within a priority stays close to oldest first) is in task-index.ts.
 *
 * Bounded by the sessions: one map entry per session, one count per coordinator serving any.
 */

/** FNV-1a (32 bit) of a string, then murmur3's fmix32 (nearby strings must not give nearby hashes). */
function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return fmix32(h);
}

function fmix32(value: number): number {
  let h = value;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The rendezvous weight of (member, resource): both hashed, combined, mixed again. */
export function rendezvousWeight(member: string, resource: string): number {
  return weightOf(hash32(member), hash32(resource));
}

function weightOf(memberHash: number, resourceHash: number): number {
  return fmix32(memberHash ^ Math.imul(resourceHash, 0x9e3779b1));
}

export class CoordinatorPeers {
  readonly #bySession = new Map<string, string>();
  readonly #sessions = new Map<string, number>();
  #members: readonly string[] = [];
  /** `hash32` of each member, in `#members` order: a select asks per candidate, members change rarely. */
  #memberHashes: readonly number[] = [];

  /** Start again from the sessions of a snapshot (`[sessionId, coordinatorId]`). */
  reset(sessions: Iterable<readonly [string, string]>): void {
    this.#bySession.clear();
    this.#sessions.clear();
    for (const [sessionId, coordinatorId] of sessions) this.#add(sessionId, coordinatorId);
    this.#refresh();
  }

  /** A session key written (served by `coordinatorId`) or deleted (`undefined`). */
  apply(sessionId: string, coordinatorId: string | undefined): void {
    const before = this.#bySession.get(sessionId);
    if (before === coordinatorId) return;
    if (before !== undefined) {
      this.#bySession.delete(sessionId);
      const left = (this.#sessions.get(before) ?? 1) - 1;
      if (left > 0) this.#sessions.set(before, left);
      else this.#sessions.delete(before);
    }
    if (coordinatorId !== undefined) this.#add(sessionId, coordinatorId);
    this.#refresh();
  }

  /** Coordinators serving at least one session, sorted. */
  get members(): readonly string[] {
    return this.#members;
  }

  /**
   * The member `resource` is assigned to (highest rendezvous weight; ties to the smaller id), or
   * undefined when fewer than two coordinators serve sessions (nothing to share out).
   */
  assignee(resource: string): string | undefined {
    const members = this.#members;
    if (members.length < 2) return undefined;
    const resourceHash = hash32(resource);
    let best: string | undefined;
    let bestWeight = -1;
    for (let i = 0; i < members.length; i += 1) {
      const weight = weightOf(this.#memberHashes[i] ?? 0, resourceHash);
      if (weight > bestWeight) {
        best = members[i];
        bestWeight = weight;
      }
    }
    return best;
  }

  #add(sessionId: string, coordinatorId: string): void {
    this.#bySession.set(sessionId, coordinatorId);
    this.#sessions.set(coordinatorId, (this.#sessions.get(coordinatorId) ?? 0) + 1);
  }

  #refresh(): void {
    const ids = [...this.#sessions.keys()].sort();
    if (ids.length === this.#members.length && ids.every((id, i) => id === this.#members[i])) return;
    this.#members = ids;
    this.#memberHashes = ids.map(hash32);
  }
}
