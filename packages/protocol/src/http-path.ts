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
  let path: string;
  try {
    path = new URL(`/${rawPath}`.replace(/\/{2,}/g, '/'), 'http://h').pathname;
  } catch {
    return rawUrl;
  }
  return `${path.replace(/\/{2,}/g, '/')}${query}`;
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
