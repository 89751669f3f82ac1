/**
 * The coordinator's route credentials. Auth comes from the matched route, never from the URL:
 * the hook is `installRouteAuth` of @leasehold/daemon-kit (one hook for both daemons, so a fix
 * exists once); this file names the coordinator's credentials and how it refuses.
 */
import { installRouteAuth as installSharedRouteAuth, type CredentialCheck } from '@leasehold/daemon-kit';
import { RouteCredential } from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { sendError } from './send-error.js';

export { routeTable, type RouteEntry } from '@leasehold/daemon-kit';
export type { CredentialCheck } from '@leasehold/daemon-kit';

/** The credentials the coordinator's routes use. */
export const Credential = {
  NONE: RouteCredential.NONE,
  ADMIN: RouteCredential.ADMIN,
  /** The web console's routes (`/ui/api/...`): its session cookie or an admin bearer key. */
  CONSOLE: RouteCredential.CONSOLE,
} as const;
export type Credential = (typeof Credential)[keyof typeof Credential];

export interface RouteAuthOptions {
  /** One check per credential other than NONE. */
  readonly checks: Readonly<Record<Exclude<Credential, 'none'>, CredentialCheck>>;
  readonly log: Logger;
}

/** Call before registering any route. */
export function installRouteAuth(app: FastifyInstance, options: RouteAuthOptions): void {
  installSharedRouteAuth<Credential>(app, {
    daemon: 'coordinator',
    checks: options.checks,
    sendError,
    log: options.log,
  });
}
