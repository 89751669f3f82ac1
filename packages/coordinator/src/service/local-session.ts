/** A session this coordinator serves, as the services see it (sessions.ts keeps them). */
import type { SessionGrants } from '../core/session-grants.js';
import type { WorkerChannel } from './channel.js';

/** The most request ids a session keeps as unsure (see `LocalSession.unsureRequests`). */
export const MAX_UNSURE_REQUESTS = 64;

export interface LocalSession {
  readonly sessionId: string;
  readonly leaseId: string;
  readonly workerId: string;
  readonly incarnation: string;
  /** mod_revision of sessions/<sid> as this coordinator wrote it: proof that it serves the session. */
  modRevision: bigint;
  channel: WorkerChannel | undefined;
  readonly inflight: Set<Promise<unknown>>;
  /** Waiting long-poll acquires of this session: woken when the session ends. */
  readonly wakers: Set<() => void>;
  /**
   * Grants sent to this session's worker and not yet released or completed here: resource ->
   * token and request id (which names the grant's holding key). A hint for release / complete,
   * which compare both keys in etcd; the watch-fed index and a read back it up. Its request ids are
   * indexed: whether an acquire's request id made one of them is one lookup.
   */
  readonly granted: SessionGrants;
  /**
   * Every request of this session so far arrived here on its current channel, since the session was
   * opened here (false once it is resumed or adopted): an acquire whose request id is none of
   * `granted`'s was never granted, so it needs no holding read (core/grant-decisions `needsRequestRead`).
   */
  requestsKnown: boolean;
  /**
   * Request ids whose grant txn failed without an answer (a lost reply: it may have been applied),
   * until an acquire of that id has read its holding; at most {@link MAX_UNSURE_REQUESTS}, past
   * which `requestsKnown` is cleared instead.
   */
  readonly unsureRequests: Set<string>;
  /** Grants in flight allowed at once (the hello's `capacity`): held grants plus acquires being served. */
  capacity: number;
  /**
   * The queues it serves (the hello's `queues`, repeats dropped; `default` for a hello without any):
   * set again by every hello that resumes it.
   */
  queues: readonly string[];
  /** Rotates which of its queues an acquire looks at first (fair across them). */
  queueTurn: number;
  /** Acquires being served now (long polls included). */
  acquiring: number;
  /**
   * Of those, acquires riding in their completion's finish txn, not yet settled
   * (`GrantService.joinCarried`): each one's completed lease is still among `granted` until its
   * finish is answered, but is ended by the very txn that would grant it, so the two count once.
   */
  carrying: number;
  /**
   * The worker is closing (`session.drain`): its acquires do not wait (long poll) from now on. Kept
   * across a resume on this coordinator; a closing worker sends it again after any new welcome.
   */
  draining: boolean;
}

/** What the other services ask of the session registry (a narrow view of `SessionManager`). */
export interface SessionRegistry {
  get(sessionId: string): LocalSession | undefined;
  /** The session is served here and its deadline has not passed. */
  isLive(session: LocalSession): boolean;
  remainingMs(session: LocalSession): number;
  /** Count `op` as in flight on the session: its end waits (bounded) for it. */
  track<T>(session: LocalSession, op: Promise<T>): Promise<T>;
}
