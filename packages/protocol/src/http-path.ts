/**
 * The canonical form of an HTTP request-target's path, used by both services to route on it
 * (fastify `rewriteUrl`): dot segments resolved (also percent-encoded ones, as WHATWG URL parsing
 * does) and runs of `/` collapsed; a fragment is dropped; the query string is kept as it was.
 * Percent-encoded characters other than dots stay encoded (ids may carry `%2F` inside a segment).
 * Auth never looks at this text: it comes from the matched route (see each service's route-auth).
 */
export function normalizePath(rawUrl: string): string {
  const cut = rawUrl.search(/[?#]/);
  const rawPath = cut === -1 ? rawUrl : rawUrl.slice(0, cut);
  const rest = cut === -1 ? '' : rawUrl.slice(cut);
  const query = rest.startsWith('#') ? '' : (rest.split('#', 1)[0] ?? '');
  // Nearly every request's path is canonical already: then it is its own canonical form, and the
  // WHATWG URL parse (~5 % of the sink's main thread under write load) is skipped.
  if (isCanonicalPath(rawPath)) return `${rawPath}${query}`;
  const path = canonicalPathByUrl(rawPath);
  return path === undefined ? rawUrl : `${path}${query}`;
}

/**
 * Only characters the WHATWG path parser copies as they are (unreserved, sub-delims, `:`, `@`, `%`
 * and `/`), starting with `/`.
 */
const PLAIN_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$/;
/** What the URL parse would change among those: a run of `/`, a dot segment, an encoded dot. */
const NOT_CANONICAL = /\/\/|%2e|(?:^|\/)\.{1,2}(?:\/|$)/i;

/** True when `rawPath` is certainly its own canonical form (false sends it through the URL parse). */
function isCanonicalPath(rawPath: string): boolean {
  return PLAIN_PATH.test(rawPath) && !NOT_CANONICAL.test(rawPath);
}

/**
 * The canonical form of a path by WHATWG URL parsing (the definition `normalizePath` keeps; exported
 * for the test that checks the fast path against it): dot segments resolved, runs of `/` collapsed;
 * undefined when the URL parser refuses it.
 */
export function canonicalPathByUrl(rawPath: string): string | undefined {
  try {
    const path = new URL(`/${rawPath}`.replace(/\/{2,}/g, '/'), 'http://h').pathname;
    return path.replace(/\/{2,}/g, '/');
  } catch {
    return undefined;
  }
}

/**
 * Every credential a leasehold HTTP route can require, across services (one union, so both
 * services' fastify route-config declarations agree). Each service accepts only its own subset.
 */
export const RouteCredential = {
  /** Open: health, readiness, metrics. */
  NONE: 'none',
  /** Coordinator: an admin bearer key. */
  ADMIN: 'admin',
  /** Coordinator web console: its session cookie (issued for an admin key) or an admin bearer key. */
  CONSOLE: 'console',
  /** Sink: a coordinator bearer key (a read-only key gets 403). */
  COORDINATOR: 'coordinator',
  /** Sink: a coordinator key or a read-only key. */
  READ: 'read',
  /** Sink: the grant's capability in the body, checked by the handler after parsing. */
  CAPABILITY: 'capability',
} as const;
export type RouteCredential = (typeof RouteCredential)[keyof typeof RouteCredential];
