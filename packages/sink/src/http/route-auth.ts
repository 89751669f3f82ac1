/**
 * The sink's route credentials. Auth comes from the matched route, never from the URL: the hook
 * is `installRouteAuth` of @leasehold/daemon-kit (one hook for both daemons, so a fix exists
 * once); this file names the sink's credentials and their checks.
 *
 * | credential    | who                                          | refused with                      |
 * | ------------- | -------------------------------------------- | --------------------------------- |
 * | `none`        | anyone (health, readiness, metrics)          | —                                 |
 * | `coordinator` | a coordinator bearer key                     | 401; a read-only key gets 403     |
 * | `read`        | a coordinator key or a read-only key         | 401                               |
 * | `capability`  | the grant's capability in the body (checked by the handler after parsing) | 401 / 403 |
 */
import { installRouteAuth as installSharedRouteAuth, type Refusal } from '@leasehold/daemon-kit';
import { RouteCredential, type KeyRing } from '@leasehold/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { bearerOf } from './auth.js';
import { sendError } from './replies.js';

export { routeTable, type RouteEntry } from '@leasehold/daemon-kit';

/** The credentials the sink's routes use. */
export const Credential = {
  NONE: RouteCredential.NONE,
  COORDINATOR: RouteCredential.COORDINATOR,
  READ: RouteCredential.READ,
  CAPABILITY: RouteCredential.CAPABILITY,
} as const;
export type Credential = (typeof Credential)[keyof typeof Credential];

export interface SinkRings {
  readonly coordinator: KeyRing;
  /** Coordinator keys and read-only keys. */
  readonly read: KeyRing;
  /** Read-only keys alone: shown a 403 (not a 401) where a coordinator key is needed. */
  readonly readOnly: KeyRing;
}

function unknownKey(key: string | undefined): Refusal {
  return {
    code: 'UNAUTHENTICATED',
    message: key === undefined ? 'missing Authorization: Bearer <key>' : 'unknown bearer key',
    logFields: { hasKey: key !== undefined },
  };
}

/** Call before registering any route. */
export function installRouteAuth(app: FastifyInstance, rings: SinkRings): void {
  installSharedRouteAuth<Credential>(app, {
    daemon: 'sink',
    sendError,
    checks: {
      coordinator: (request: FastifyRequest) => {
        const key = bearerOf(request);
        if (rings.coordinator(key)) return true;
        if (rings.readOnly(key)) {
          return { code: 'FORBIDDEN', message: 'this key may only read', logPhrase: 'read-only key refused' };
        }
        return unknownKey(key);
      },
      read: (request: FastifyRequest) => {
        const key = bearerOf(request);
        return rings.read(key) || unknownKey(key);
      },
      // The handler checks the capability in the body after parsing it.
      capability: () => true,
    },
  });
}
