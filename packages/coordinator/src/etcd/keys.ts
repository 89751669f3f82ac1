/**
 * The etcd key layout (v2), under one configurable prefix `P` (ends in `/`):
 *
 * | key                                   | value          | lease   | notes                                  |
 * |---------------------------------------|----------------|---------|----------------------------------------|
 * | `P/tasks/<taskId>`                    | TaskRecord     | none    | small and bounded: no payload, no      |
 * |                                       |                |         | history (core/task-record.ts)          |
 * | `P/inputs/<taskId>`                   | payload JSON   | none    | written once by the submit txn; read   |
 * |                                       |                |         | by the grant txn and task views        |
 * | `P/history/<taskId>#<n>`              | AttemptRecord  | none    | the n-th ended attempt (12 digits); the|
 * |                                       |                |         | last MAX_TASK_HISTORY are kept         |
 * | `P/locks/<name>`                      | coordinator id | its own | `retention`: one sweeper at a time;    |
 * |                                       |                |         | `migration`: one layout converter      |
 * | `P/owners/<resource>`                 | OwnerRecord    | session | create_revision = fencing token        |
 * | `P/sessions/<sessionId>`              | SessionRecord  | session | mod_revision = who serves it, and when |
 * | `P/holdings/<sessionId>/<requestId>`  | HoldingRecord  | session | one per live grant: the session's      |
 * |                                       |                |         | owner keys by prefix, and the acquire's|
 * |                                       |                |         | idempotency record; create_rev = token |
 * | `P/console/revoked/<loginId>`         | ConsoleRevoked | its own | a console logout, for every coordinator|
 * |                                       |                |         | (lives as long as the cookie would)    |
 * | `P/guard/nospace`                     | never written  | none    | the put of a failure list that never   |
 * |                                       |                |         | runs: etcd's NOSPACE cap then counts a |
 * |                                       |                |         | request of nested puts (quota-guard.ts)|
 *
 * Session ids are hex (no `/`), so `holdings/<sid>/` is an exact prefix; task ids never contain
 * `#`, so `history/<taskId>#` is one too. In key order the families are console < guard < history <
 * holdings < inputs < locks < owners < sessions < tasks: the watch-fed index watches `owners/` to
 * the end of `tasks/` ({@link KeyLayout.watched}) and never sees payloads, histories, holdings,
 * locks or the console's keys (the console's revocations have their own watch).
 *
 * Layout v1 (until 0.2) kept the payload and the history inside `tasks/<taskId>`; a coordinator
 * of this layout reads such records and moves both out (core/task-record.ts, `migrateTasks`).
 *
 * Layout history: until 2026-11-29 holdings were keyed by resource and a separate
 * `requests/<sid>/<requestId>` record (never deleted before the session ended) made acquires
 * idempotent; one key now does both. A coordinator of this layout needs a prefix without
 * live sessions of the old one.
 */
import type { KeyRange } from './backend.js';

export type ParsedKey =
  | { readonly family: 'task'; readonly taskId: string }
  | { readonly family: 'owner'; readonly resource: string }
  | { readonly family: 'session'; readonly sessionId: string }
  | { readonly family: 'holding'; readonly sessionId: string; readonly requestId: string };

export class KeyLayout {
  readonly prefix: string;
  readonly tasks: string;
  readonly owners: string;
  readonly sessions: string;
  readonly holdings: string;
  readonly inputs: string;
  readonly history: string;
  readonly locks: string;
  /** Revoked console logins (logout): `console/revoked/<loginId>`. */
  readonly consoleRevoked: string;
  /** Never written: the guard put of requests whose puts are all nested (quota-guard.ts). */
  readonly quotaGuard: string;
  /** What the watch-fed index watches: `owners/` up to the end of `tasks/` (not the holdings). */
  readonly watched: KeyRange;

  constructor(prefix: string) {
    this.prefix = prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.tasks = `${this.prefix}tasks/`;
    this.owners = `${this.prefix}owners/`;
    this.sessions = `${this.prefix}sessions/`;
    this.holdings = `${this.prefix}holdings/`;
    this.inputs = `${this.prefix}inputs/`;
    this.history = `${this.prefix}history/`;
    this.locks = `${this.prefix}locks/`;
    this.consoleRevoked = `${this.prefix}console/revoked/`;
    this.quotaGuard = `${this.prefix}guard/nospace`;
    this.watched = { start: this.owners, endPrefix: this.tasks };
  }

  task(taskId: string): string {
    return `${this.tasks}${taskId}`;
  }

  /** The payload of task `taskId`. */
  input(taskId: string): string {
    return `${this.inputs}${taskId}`;
  }

  /** Prefix of the history entries of task `taskId` (exact: ids have no `#`). */
  historyOf(taskId: string): string {
    return `${this.history}${taskId}#`;
  }

  /** History entry `n` (1-based) of task `taskId`; keys sort in attempt order. */
  historyEntry(taskId: string, n: number): string {
    return `${this.historyOf(taskId)}${String(n).padStart(12, '0')}`;
  }

  /** A short lock: `retention` (one sweeper at a time), `migration` (one layout converter at a time). */
  lock(name: 'retention' | 'migration'): string {
    return `${this.locks}${name}`;
  }

  owner(resource: string): string {
    return `${this.owners}${resource}`;
  }

  session(sessionId: string): string {
    return `${this.sessions}${sessionId}`;
  }

  holdingsOf(sessionId: string): string {
    return `${this.holdings}${sessionId}/`;
  }

  holding(sessionId: string, requestId: string): string {
    return `${this.holdingsOf(sessionId)}${requestId}`;
  }

  consoleRevocation(loginId: string): string {
    return `${this.consoleRevoked}${loginId}`;
  }

  parse(key: string): ParsedKey | undefined {
    if (key.startsWith(this.tasks)) return { family: 'task', taskId: key.slice(this.tasks.length) };
    if (key.startsWith(this.owners)) return { family: 'owner', resource: key.slice(this.owners.length) };
    if (key.startsWith(this.sessions)) return { family: 'session', sessionId: key.slice(this.sessions.length) };
    if (!key.startsWith(this.holdings)) return undefined;
    const rest = key.slice(this.holdings.length);
    const slash = rest.indexOf('/');
    return slash > 0
      ? { family: 'holding', sessionId: rest.slice(0, slash), requestId: rest.slice(slash + 1) }
      : undefined;
  }
}

/** The etcd `range_end` that selects every key starting with `prefix`. */
export function prefixEnd(prefix: string): Buffer {
  const bytes = Buffer.from(prefix);
  for (let i = bytes.length - 1; i >= 0; i -= 1) {
    const byte = bytes[i] ?? 0;
    if (byte < 0xff) {
      const end = Buffer.from(bytes.subarray(0, i + 1));
      end[i] = byte + 1;
      return end;
    }
  }
  return Buffer.from([0]);
}

/** etcd lease id (decimal string from etcd3) -> session id (hex). */
export function sessionIdOf(leaseId: string): string {
  return BigInt(leaseId).toString(16);
}
