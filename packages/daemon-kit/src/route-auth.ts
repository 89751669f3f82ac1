/**
 * Auth from the route table, not from the URL — the one hook both daemons install.
 *
 * Every route declares the credential it needs in its own options (`config: { credential }`), and
 * one `onRequest` hook enforces it from the *matched* route (`request.routeOptions.config`). The
 * URL the client sent is never inspected for auth, so no spelling of a path (percent-encoding,
 * doubled slashes, dot segments, case) can reach a handler without the handler's own credential.
 * (This closed a critical bypass once: a check on the URL text let `/%761/...` through.)
 *
 * - A route registered without a credential the daemon knows fails at registration (`onRoute`
 *   throws): new routes cannot slip through. `routeTable(app)` lists what was registered, for the
 *   tests that walk it.
 * - Unmatched requests are answered 404 by the not-found handler before any work (no auth, no body
 *   parsing: the hook does not run the credential check for them).
 * - The servers route on `normalizePath` of the URL (dot segments resolved, duplicate slashes
 *   collapsed) and match static parts case-insensitively (params keep their case), so every
 *   spelling of a path gets the answer of its canonical form.
 *
 * What each daemon supplies: its credentials and one check per credential other than `none`
 * (`true`: let it through; `false`: the standard 401; or a {@link Refusal} of its own, e.g. the
 * sink's 403 for a read-only key), and how it sends an error body.
 */
import { RouteCredential, type ErrorCode } from '@leasehold/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Logger } from 'pino';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Required on every route: who may call it. */
    credential?: RouteCredential;
  }
}

export interface RouteEntry {
  readonly method: string;
  readonly url: string;
  readonly credential: RouteCredential | undefined;
}

/** A check's own answer for a request it refuses. */
export interface Refusal {
  readonly code: ErrorCode;
  readonly message: string;
  /** The fixed lower-case phrase of the warn log line. Default `http request refused: bad credentials`. */
  readonly logPhrase?: string;
  /** More fields for the log line (never the key). */
  readonly logFields?: Readonly<Record<string, unknown>>;
}

/** `true` lets the request through; `false` refuses it with 401 UNAUTHENTICATED. */
export type CredentialCheck = (request: FastifyRequest) => boolean | Refusal;

export interface RouteAuthOptions<C extends RouteCredential> {
  /** Named in the registration error: `route GET /x declares no <daemon> credential`. */
  readonly daemon: string;
  /** One check per credential the daemon's routes may declare (`none` needs none: it is always open). */
  readonly checks: Readonly<Record<Exclude<C, 'none'>, CredentialCheck>>;
  /** Sends the daemon's error body with the status of `code`. */
  readonly sendError: (reply: FastifyReply, code: ErrorCode, message: string) => unknown;
  /** Where refusals are logged. Default: the request's logger. */
  readonly log?: Logger;
}

const tables = new WeakMap<FastifyInstance, RouteEntry[]>();

/** Every route registered on `app` since `installRouteAuth`, with its declared credential. */
export function routeTable(app: FastifyInstance): readonly RouteEntry[] {
  return tables.get(app) ?? [];
}

/** Call before registering any route. */
export function installRouteAuth<C extends RouteCredential>(app: FastifyInstance, options: RouteAuthOptions<C>): void {
  const checks = options.checks as Readonly<Record<string, CredentialCheck>>;
  const known: readonly string[] = [RouteCredential.NONE, ...Object.keys(checks)];
  const table: RouteEntry[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (route: RouteOptions) => {
    const credential = route.config?.credential;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) table.push({ method, url: route.url, credential });
    if (credential === undefined || !known.includes(credential)) {
      throw new Error(
        `route ${methods.join(',')} ${route.url} declares no ${options.daemon} credential (config.credential)`,
      );
    }
  });
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return; // the not-found handler answers; no credential needed to hear "404"
    const credential = request.routeOptions.config.credential;
    if (credential === RouteCredential.NONE) return;
    const check = credential === undefined ? undefined : checks[credential];
    const verdict = check === undefined ? false : check(request);
    if (verdict === true) return;
    const refusal: Refusal =
      verdict === false
        ? { code: 'UNAUTHENTICATED', message: `missing or wrong ${credential ?? 'route'} key` }
        : verdict;
    (options.log ?? request.log).warn(
      {
        remote: request.ip,
        credential: credential ?? 'undeclared',
        route: request.routeOptions.url,
        ...refusal.logFields,
      },
      refusal.logPhrase ?? 'http request refused: bad credentials',
    );
    await options.sendError(reply, refusal.code, refusal.message);
  });
}
