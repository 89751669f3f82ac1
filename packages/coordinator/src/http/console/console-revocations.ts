/**
 * Console logins ended by logout, shared by every coordinator through etcd.
 *
 * Logout records the login's id (its cookie's nonce) under `console/revoked/` (txn
 * `revokeConsoleSession`, on a lease that ends when the cookie would have expired anyway) and
 * refuses it here at once; every coordinator keeps the set of revoked ids from one read and a
 * watch of that prefix, so a copy of the cookie is refused by every one of them as soon as its
 * watch delivers the revocation (and each ends the console streams opened with it).
 *
 * Fail closed: until the set has been read — at start, and again after the watch was lost
 * (compaction, failure) — `accepts` is false and console cookies are refused (an admin bearer key
 * still works). A watch that drops and resumes by itself (the etcd client does that) loses
 * nothing, so it does not close the console.
 *
 * Without a store (an embedded HTTP server, the fuzzers) revocations are this process's alone.
 */
import type { Logger } from 'pino';
import type { ConsoleRevocation, ConsoleRevocationStore } from '../../store/port.js';

export interface ConsoleRevocationsDeps {
  /** Where revocations are shared; undefined: this process only. */
  readonly store: ConsoleRevocationStore | undefined;
  /** Wall clock (epoch ms): cookie expiry. */
  readonly wallClock: () => number;
  readonly log: Logger;
}

const MAX_RETRY_MS = 5_000;

export class ConsoleRevocations {
  readonly #deps: ConsoleRevocationsDeps;
  /** Revoked login id -> when its cookie expires anyway. */
  readonly #revoked = new Map<string, number>();
  readonly #listeners = new Set<(loginId: string) => void>();
  #watch: { cancel(): Promise<void> } | undefined;
  #ready: boolean;
  #closed = false;
  #failures = 0;
  #retry: NodeJS.Timeout | undefined;

  constructor(deps: ConsoleRevocationsDeps) {
    this.#deps = deps;
    this.#ready = deps.store === undefined;
  }

  /** Read the revocations and watch for more; rejects when the store cannot be read at all. */
  async start(): Promise<void> {
    await this.#load();
  }

  /** Whether a cookie of `loginId` may be used now: the set is current and does not hold it. */
  accepts(loginId: string): boolean {
    return this.#ready && !this.#revoked.has(loginId);
  }

  /** The set of revocations is current (read, and watched since). */
  get ready(): boolean {
    return this.#ready;
  }

  /** Called with each login id revoked from now on (here or by a peer). */
  onRevoked(listener: (loginId: string) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /**
   * Logout: refused here at once, then recorded for every coordinator. Rejects when the record
   * could not be written (the login is still refused here; peers would accept it).
   */
  async revoke(revocation: ConsoleRevocation): Promise<void> {
    this.#add([revocation]);
    const store = this.#deps.store;
    if (store === undefined) return;
    const ttlSeconds = Math.max(1, Math.ceil((revocation.expiresAtMs - this.#deps.wallClock()) / 1_000));
    await store.revokeConsoleSession(revocation, ttlSeconds);
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#retry);
    await this.#watch?.cancel().catch(() => undefined);
  }

  async #load(): Promise<void> {
    const store = this.#deps.store;
    if (store === undefined || this.#closed) return;
    this.#ready = false;
    await this.#watch?.cancel().catch(() => undefined);
    this.#watch = undefined;
    const read = await store.consoleRevocations();
    this.#add(read.revocations);
    let lost = false;
    const watch = await store.watchConsoleRevocations(read.revision + 1n, {
      onRevoked: (revocations) => {
        if (!lost) this.#add(revocations);
      },
      onError: (err) => {
        if (lost || this.#closed) return;
        lost = true;
        this.#ready = false;
        this.#deps.log.warn({ err }, 'console revocation watch lost; console cookies refused until it is back');
        this.#scheduleReload();
      },
    });
    if (this.#isClosed()) {
      await watch.cancel().catch(() => undefined);
      return;
    }
    this.#watch = watch;
    this.#failures = 0;
    this.#ready = !lost;
  }

  /** (A method: `close()` may have run during an await, which flow analysis does not see.) */
  #isClosed(): boolean {
    return this.#closed;
  }

  #scheduleReload(): void {
    if (this.#closed || this.#retry !== undefined) return;
    const delayMs = Math.min(MAX_RETRY_MS, 100 * 2 ** Math.min(this.#failures, 6));
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      this.#load().catch((err: unknown) => {
        this.#failures += 1;
        this.#deps.log.warn({ err }, 'console revocations could not be read; retrying');
        this.#scheduleReload();
      });
    }, delayMs);
    this.#retry.unref();
  }

  #add(revocations: readonly ConsoleRevocation[]): void {
    const nowMs = this.#deps.wallClock();
    for (const [loginId, expiresAtMs] of this.#revoked) if (expiresAtMs <= nowMs) this.#revoked.delete(loginId);
    for (const r of revocations) {
      if (r.expiresAtMs <= nowMs || this.#revoked.has(r.loginId)) continue;
      this.#revoked.set(r.loginId, r.expiresAtMs);
      for (const listener of [...this.#listeners]) listener(r.loginId);
    }
  }
}
