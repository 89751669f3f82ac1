/**
 * The etcd key layout, under one configurable prefix `P` (ends in `/`):
 *
 * | key                                   | value          | lease   | notes                                  |
 * |---------------------------------------|----------------|---------|----------------------------------------|
 * | `P/tasks/<taskId>`                    | TaskRecord     | none    | state pending / completed / cancelled  |
 * | `P/owners/<resource>`                 | OwnerRecord    | session | create_revision = fencing token        |
 * | `P/sessions/<sessionId>`              | SessionRecord  | session | mod_revision = who serves it, and when |
 * | `P/holdings/<sessionId>/<resource>`   | HoldingRecord  | session | the session's owner keys, findable     |
 * | `P/requests/<sessionId>/<requestId>`  | RequestRecord  | session | acquire idempotency; create_rev = token|
 *
 * Session ids are hex (no `/`), so `holdings/<sid>/` and `requests/<sid>/` are exact prefixes.
 */
export type ParsedKey =
  | { readonly family: 'task'; readonly taskId: string }
  | { readonly family: 'owner'; readonly resource: string }
  | { readonly family: 'session'; readonly sessionId: string }
  | { readonly family: 'holding'; readonly sessionId: string; readonly resource: string }
  | { readonly family: 'request'; readonly sessionId: string; readonly requestId: string };

export class KeyLayout {
  readonly prefix: string;
  readonly tasks: string;
  readonly owners: string;
  readonly sessions: string;
  readonly holdings: string;
  readonly requests: string;
  /**
   * What the watch-fed index watches: `owners/` up to the end of `tasks/`. In key order the
   * families are holdings < owners < requests < sessions < tasks, so this range skips holdings
   * (and the watch filters requests out by parsing).
   */
  readonly watched: { readonly start: string; readonly end: Buffer };

  constructor(prefix: string) {
    this.prefix = prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.tasks = `${this.prefix}tasks/`;
    this.owners = `${this.prefix}owners/`;
    this.sessions = `${this.prefix}sessions/`;
    this.holdings = `${this.prefix}holdings/`;
    this.requests = `${this.prefix}requests/`;
    this.watched = { start: this.owners, end: prefixEnd(this.tasks) };
  }

  task(taskId: string): string {
    return `${this.tasks}${taskId}`;
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

  holding(sessionId: string, resource: string): string {
    return `${this.holdingsOf(sessionId)}${resource}`;
  }

  requestsOf(sessionId: string): string {
    return `${this.requests}${sessionId}/`;
  }

  request(sessionId: string, requestId: string): string {
    return `${this.requestsOf(sessionId)}${requestId}`;
  }

  parse(key: string): ParsedKey | undefined {
    if (key.startsWith(this.tasks)) return { family: 'task', taskId: key.slice(this.tasks.length) };
    if (key.startsWith(this.owners)) return { family: 'owner', resource: key.slice(this.owners.length) };
    if (key.startsWith(this.sessions)) return { family: 'session', sessionId: key.slice(this.sessions.length) };
    const scoped = (base: string): [string, string] | undefined => {
      if (!key.startsWith(base)) return undefined;
      const rest = key.slice(base.length);
      const slash = rest.indexOf('/');
      return slash > 0 ? [rest.slice(0, slash), rest.slice(slash + 1)] : undefined;
    };
    const h = scoped(this.holdings);
    if (h !== undefined) return { family: 'holding', sessionId: h[0], resource: h[1] };
    const r = scoped(this.requests);
    if (r !== undefined) return { family: 'request', sessionId: r[0], requestId: r[1] };
    return undefined;
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

/** Session id (hex) -> etcd lease id (decimal string). */
export function leaseIdOf(sessionId: string): string {
  return BigInt(`0x${sessionId}`).toString(10);
}
