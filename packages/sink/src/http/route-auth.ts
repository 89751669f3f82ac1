/**
 * Auth from the route table, not from the URL (the sink's version of the coordinator's scheme).
 *
 * Every route declares its credential in its options (`config: { credential }`); one `onRequest`
 * hook enforces bearer credentials from the *matched* route, so no spelling of a path can reach a
 * handler without them. A route without a declared credential fails at registration.
 *
 * | credential    | who                                          | refused with                      |
 * | ------------- | -------------------------------------------- | --------------------------------- |
 * | `none`        | anyone (health, readiness, metrics)          | —                                 |
 * | `coordinator` | a coordinator bearer key                     | 401; a read-only key gets 403     |
 * | `read`        | a coordinator key or a read-only key         | 401                               |
 * | `capability`  | the grant's capability in the body (checked by the handler after parsing) | 401 / 403 |
 */
import { RouteCredential, type KeyRing } from '@leasehold/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { bearerOf } from './auth.js';
import { sendError } from './replies.js';

/** The credentials the sink's routes use. */
export const Credential = {
  NONE: RouteCredential.NONE,
  COORDINATOR: RouteCredential.COORDINATOR,
  READ: RouteCredential.READ,
  CAPABILITY: RouteCredential.CAPABILITY,
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

export interface SinkRings {
  readonly coordinator: KeyRing;
  /** Coordinator keys and read-only keys. */
  readonly read: KeyRing;
  /** Read-only keys alone: shown a 403 (not a 401) where a coordinator key is needed. */
  readonly readOnly: KeyRing;
}

/** Call before registering any route. */
export function installRouteAuth(app: FastifyInstance, rings: SinkRings): void {
  const table: RouteEntry[] = [];
  tables.set(app, table);
  app.addHook('onRoute', (route: RouteOptions) => {
    const credential = route.config?.credential;
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) table.push({ method, url: route.url, credential });
    if (credential === undefined || !KNOWN.includes(credential)) {
      throw new Error(`route ${methods.join(',')} ${route.url} declares no sink credential (config.credential)`);
    }
  });
  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.is404) return; // the not-found handler answers 404 before any work
    const credential = request.routeOptions.config.credential;
    if (credential === Credential.NONE || credential === Credential.CAPABILITY) return;
    const key = bearerOf(request);
    const ring = credential === Credential.COORDINATOR ? rings.coordinator : rings.read;
    if ((credential === Credential.COORDINATOR || credential === Credential.READ) && ring(key)) return;
    const fields = { remote: request.ip, credential: credential ?? 'undeclared', route: request.routeOptions.url };
    if (credential === Credential.COORDINATOR && rings.readOnly(key)) {
      request.log.warn(fields, 'read-only key refused');
      await sendError(reply, 'FORBIDDEN', 'this key may only read');
      return;
    }
    request.log.warn({ ...fields, hasKey: key !== undefined }, 'http request refused: bad credentials');
    await sendError(
      reply,
      'UNAUTHENTICATED',
      key === undefined ? 'missing Authorization: Bearer <key>' : 'unknown bearer key',
    );
  });
}
