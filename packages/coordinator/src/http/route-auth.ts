/**
 * Auth from the route table, not from the URL.
 *
 * Every route declares the credential it needs in its own options (`config: { credential }`), and
 * one `onRequest` hook enforces it from the *matched* route (`request.routeOptions.config`). The
 * URL the client sent is never inspected for auth, so no spelling of a path (percent-encoding,
 * doubled slashes, dot segments, case) can reach a handler without the handler's own credential.
 *
 * - A route registered without a credential fails at registration (`onRoute` throws): new routes
 *   cannot slip through. `routeTable(app)` lists what was registered, for the test that walks it.
 * - Unmatched requests are answered 404 by the not-found handler before any work (no auth, no
 *   body parsing: the hook does not run the credential check for them).
 * - The server routes on `normalizePath` of the URL (dot segments resolved, duplicate slashes
 *   collapsed) and matches static parts case-insensitively (params keep their case), so every
 *   spelling of a path gets the answer of its canonical form.
 */
import { RouteCredential } from '@leasehold/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import type { Logger } from 'pino';
import { sendError } from './send-error.js';

/** The credentials the coordinator's routes use. */
export const Credential = {
  NONE: RouteCredential.NONE,
  ADMIN: RouteCredential.ADMIN,
  /** The web console's routes (`/ui/api/...`): its session cookie or an admin bearer key. */
  CONSOLE: RouteCredential.CONSOLE,
} as const;
export type Credential = (typeof Credential)[keyof typeof Credential];
const KNOWN: readonly RouteCredential[] = Object.values(Credential);

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

const tables = new WeakMap<FastifyInstance, RouteEntry[]>();

/** Every route registered on `app` since `installRouteAuth`, with its declared credential. */
export function routeTable(app: FastifyInstance): readonly RouteEntry[] {
  return tables.get(app) ?? [];
}

export type CredentialCheck = (request: FastifyRequest) => boolean;

export interface RouteAuthOptions {
  /** One check per credential other than NONE. */
  readonly checks: Readonly<Record<Exclude<Credential, 'none'>, CredentialCheck>>;
  readonly log: Logger;
}

/** Call before registering any route. */
export function installRouteAuth(app: FastifyInstance, options: RouteAuthOptions): void {
  const table: RouteEntry[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (route: RouteOptions) => {
    const credential = route.config?.credential;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) table.push({ method, url: route.url, credential });
    if (credential === undefined || !KNOWN.includes(credential)) {
      throw new Error(`route ${methods.join(',')} ${route.url} declares no coordinator credential (config.credential)`);
    }
  });
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return; // the not-found handler answers; no credential needed to hear "404"
    const credential = request.routeOptions.config.credential;
    if (credential === Credential.NONE) return;
    if ((credential === Credential.ADMIN || credential === Credential.CONSOLE) && options.checks[credential](request)) {
      return;
    }
    options.log.warn(
      { remote: request.ip, credential: credential ?? 'undeclared', route: request.routeOptions.url },
      'http request refused: bad credentials',
    );
    await sendError(reply, 'UNAUTHENTICATED', `missing or wrong ${credential ?? 'route'} key`);
  });
}
