/**
 * Session deadlines, judged by the coordinator's own monotonic clock (injected).
 *
 * Rules:
 * - a session opened (or adopted) at `t` has deadline `t + ttlMs`;
 * - a heartbeat received at `r` is accepted only while the session is live and `r < deadline`
 *   (and the clock still reads `< deadline` when the decision is taken); it moves the deadline to
 *   `max(deadline, r + ttlMs)`. A heartbeat at exactly the deadline is refused;
 * - once the deadline has passed the session can only end: nothing revives it. {@link takeDue}
 *   moves every live session whose deadline is `<= now` to `ending`;
 * - `ending` and `ended` sessions refuse heartbeats.
 *
 * The etcd lease behind a session has a longer TTL and is only the backstop if this coordinator
 * dies; ownership itself is never inferred from this table alone (the owner keys in etcd decide).
 */
import type { Clock } from '@leasehold/protocol';

export const SessionPhase = {
  LIVE: 'live',
  ENDING: 'ending',
  ENDED: 'ended',
} as const;
export type SessionPhase = (typeof SessionPhase)[keyof typeof SessionPhase];

export type HeartbeatDecision =
  | { readonly ok: true; readonly deadlineMs: number; readonly ttlMs: number }
  | { readonly ok: false; readonly code: 'SESSION_EXPIRED'; readonly reason: 'deadline' | 'unknown-session' };

interface Entry {
  deadlineMs: number;
  phase: SessionPhase;
}

export class SessionTable {
  readonly #clock: Clock;
  readonly #ttlMs: number;
  readonly #entries = new Map<string, Entry>();

  constructor(clock: Clock, ttlMs: number) {
    if (!(ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    this.#clock = clock;
    this.#ttlMs = ttlMs;
  }

  get ttlMs(): number {
    return this.#ttlMs;
  }

  /** Start judging a session (new or adopted): live until now + ttl. Returns the deadline. */
  open(sessionId: string): number {
    const deadlineMs = this.#clock.nowMs() + this.#ttlMs;
    this.#entries.set(sessionId, { deadlineMs, phase: SessionPhase.LIVE });
    return deadlineMs;
  }

  /** A heartbeat (or a successful renew) received at `receivedAtMs` (default: now). */
  heartbeat(sessionId: string, receivedAtMs: number = this.#clock.nowMs()): HeartbeatDecision {
    const entry = this.#entries.get(sessionId);
    if (entry === undefined) return { ok: false, code: 'SESSION_EXPIRED', reason: 'unknown-session' };
    const now = this.#clock.nowMs();
    if (entry.phase !== SessionPhase.LIVE || !(receivedAtMs < entry.deadlineMs) || !(now < entry.deadlineMs)) {
      return { ok: false, code: 'SESSION_EXPIRED', reason: 'deadline' };
    }
    entry.deadlineMs = Math.max(entry.deadlineMs, receivedAtMs + this.#ttlMs);
    return { ok: true, deadlineMs: entry.deadlineMs, ttlMs: entry.deadlineMs - now };
  }

  /** True while the session is live and its deadline has not been reached. */
  isLive(sessionId: string): boolean {
    const entry = this.#entries.get(sessionId);
    return entry !== undefined && entry.phase === SessionPhase.LIVE && this.#clock.nowMs() < entry.deadlineMs;
  }

  phaseOf(sessionId: string): SessionPhase | undefined {
    return this.#entries.get(sessionId)?.phase;
  }

  /** Milliseconds left before the deadline (0 when reached or not live). */
  remainingMs(sessionId: string): number {
    const entry = this.#entries.get(sessionId);
    if (entry?.phase !== SessionPhase.LIVE) return 0;
    return Math.max(0, entry.deadlineMs - this.#clock.nowMs());
  }

  /** Every live session whose deadline is `<= now` moves to `ending`; their ids are returned. */
  takeDue(): string[] {
    const now = this.#clock.nowMs();
    const due: string[] = [];
    for (const [id, entry] of this.#entries) {
      if (entry.phase === SessionPhase.LIVE && entry.deadlineMs <= now) {
        entry.phase = SessionPhase.ENDING;
        due.push(id);
      }
    }
    return due;
  }

  /** End a session before its deadline (lost in etcd, shut down by the worker). Idempotent. */
  beginEnding(sessionId: string): boolean {
    const entry = this.#entries.get(sessionId);
    if (entry?.phase !== SessionPhase.LIVE) return false;
    entry.phase = SessionPhase.ENDING;
    return true;
  }

  markEnded(sessionId: string): void {
    const entry = this.#entries.get(sessionId);
    if (entry !== undefined) entry.phase = SessionPhase.ENDED;
  }

  /** Forget a session (ended, or now served by a peer). */
  remove(sessionId: string): void {
    this.#entries.delete(sessionId);
  }

  /** Earliest deadline among live sessions, for the one timer that drives {@link takeDue}. */
  nextDeadlineMs(): number | undefined {
    let next: number | undefined;
    for (const entry of this.#entries.values()) {
      if (entry.phase === SessionPhase.LIVE && (next === undefined || entry.deadlineMs < next)) {
        next = entry.deadlineMs;
      }
    }
    return next;
  }

  liveCount(): number {
    let n = 0;
    for (const entry of this.#entries.values()) if (entry.phase === SessionPhase.LIVE) n += 1;
    return n;
  }
}
