/**
 * The grants a session holds on this coordinator (`LocalSession.granted`): resource -> token and
 * the request id that made the grant, with the request ids indexed too. Every acquire asks whether
 * its request id is one of the session's grants (a retry is a replay: admitted at capacity, and it
 * needs its holding read back); answering that by walking the grants cost each acquire O(grants
 * held) — a session holding thousands made every acquire copy thousands of ids. Here it is one
 * lookup, whatever the session holds. Pure: no I/O.
 */
import type { TaskRecord } from './task-record.js';

export interface SessionGrant {
  readonly token: bigint;
  readonly requestId: string;
  /**
   * The task record the grant txn wrote, for a grant made here (not a replay): its mod_revision is
   * the token (the txn wrote it at its revision). What ending the attempt starts from while the
   * watch-fed index has not yet seen the grant — only a hint: the end txn compares it.
   */
  readonly written?: TaskRecord | undefined;
}

export class SessionGrants {
  readonly #byResource = new Map<string, SessionGrant>();
  /** Request id -> how many of the entries carry it (one, unless a request id was reused). */
  readonly #requests = new Map<string, number>();

  get size(): number {
    return this.#byResource.size;
  }

  get(resource: string): SessionGrant | undefined {
    return this.#byResource.get(resource);
  }

  /** Record (or replace) the grant on `resource`. */
  set(resource: string, grant: SessionGrant): void {
    this.#forgetRequest(this.#byResource.get(resource));
    this.#byResource.set(resource, grant);
    this.#requests.set(grant.requestId, (this.#requests.get(grant.requestId) ?? 0) + 1);
  }

  /** The grant on `resource` has ended. */
  delete(resource: string): boolean {
    const had = this.#byResource.get(resource);
    if (had === undefined) return false;
    this.#forgetRequest(had);
    return this.#byResource.delete(resource);
  }

  /** True when some grant held here was made by request `requestId`. */
  has(requestId: string): boolean {
    return this.#requests.has(requestId);
  }

  #forgetRequest(grant: SessionGrant | undefined): void {
    if (grant === undefined) return;
    const n = this.#requests.get(grant.requestId) ?? 0;
    if (n <= 1) this.#requests.delete(grant.requestId);
    else this.#requests.set(grant.requestId, n - 1);
  }
}
