/**
 * Pure decisions of opening and resuming a session (the shell is `service/sessions.ts`):
 * whether a stored session may be adopted by a hello, how a holdings read relates to the session
 * this coordinator serves, and how often the session leases are kept alive.
 */
import type { SessionRecord } from './records.js';

/** Why a session asked for cannot be resumed (the `session.expired` reason the worker is told). */
export type ExpiredReason = 'deadline' | 'unknown-session' | 'incarnation-mismatch';

/** What a hello that asks to resume brings: whose session it claims. */
export interface ResumeClaim {
  readonly workerId: string;
  readonly incarnation: string;
}

/**
 * May `claim` adopt the stored session? Only its own worker's, of the same incarnation, and not
 * one being closed (`ending`). An absent session is unknown: it ended, or never was.
 */
export function resumeVerdict<S extends { readonly record: SessionRecord }>(
  stored: S | undefined,
  claim: ResumeClaim,
): { readonly ok: true; readonly stored: S } | { readonly ok: false; readonly reason: ExpiredReason } {
  if (stored === undefined || stored.record.workerId !== claim.workerId)
    return { ok: false, reason: 'unknown-session' };
  if (stored.record.incarnation !== claim.incarnation) return { ok: false, reason: 'incarnation-mismatch' };
  if (stored.record.ending === true) return { ok: false, reason: 'deadline' };
  return { ok: true, stored };
}

/** The session as a holdings read found it, against the mod_revision this coordinator wrote. */
export function holdingsState(
  readModRevision: bigint | undefined,
  servedModRevision: bigint,
): 'gone' | 'ours' | 'moved' {
  if (readModRevision === undefined) return 'gone';
  return readModRevision === servedModRevision ? 'ours' : 'moved';
}

/**
 * How often the session leases are kept alive: every heartbeat interval, at least three times
 * per etcd lease TTL, never more often than every 50 ms.
 */
export function keepaliveIntervalMs(heartbeatIntervalMs: number, leaseMs: number): number {
  return Math.max(50, Math.min(heartbeatIntervalMs, Math.floor(leaseMs / 3)));
}
