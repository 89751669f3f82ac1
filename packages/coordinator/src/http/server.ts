/**
 * The HTTP side: the admin task API (`/v1/...`, admin bearer key), the web console (`/ui`, see
 * console/routes-console.ts) and the operational endpoints (`/healthz`, `/readyz`, `/metrics`,
 * unauthenticated). Every error body is the protocol's
 * ErrorMessage with the HTTP status of its code (400/401/404/409/413/503).
 */
import { DEFAULT_JSON_LIMITS, jsonLimitProblem, normalizePath } from '@leasehold/protocol';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { LeaseholdError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { bearerCheck } from './auth.js';
import { sendError } from './send-error.js';
import { Credential, installRouteAuth } from './route-auth.js';
import type { TaskEventService } from '../service/events.js';
import type { ReadinessReport } from '../service/readiness.js';
import { registerEventRoutes } from './routes-events.js';
import { registerTaskRoutes, type TaskApi } from './routes-tasks.js';
import type { ConsoleReadModel } from '../service/console/console-read-model.js';
import { ConsoleRevocations } from './console/console-revocations.js';
import {
  DEFAULT_CONSOLE_LOGIN_LIMITS,
  registerConsoleRoutes,
  type ConsoleLoginLimits,
} from './console/routes-console.js';
import { CONSOLE_COOKIE, decodeConsoleSession, readCookie, type ConsoleSession } from './console/session-cookie.js';

export interface HttpOptions {
  /** Serve HTTPS (fastify's `https` server options); plain HTTP without it. */
  readonly https?: { cert: Buffer; key: Buffer; ca?: Buffer; requestCert: boolean; rejectUnauthorized: boolean };
  readonly adminKeys: readonly string[];
  /** Deepest JSON nesting accepted in a body (checked on the raw text before parsing). */
  readonly maxJsonDepth?: number;
  readonly maxPayloadBytes: number;
  readonly tasks: TaskApi;
  /** The task event stream (`GET /v1/events`). */
  readonly events?: TaskEventService;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** What /readyz says (see service/readiness.ts). */
  readonly readiness: () => Promise<ReadinessReport>;
  /** The web console's read model (`/ui`); without it the page loads but its data routes answer 503. */
  readonly console?: ConsoleReadModel;
  /** Wall clock (epoch ms) for console session expiry. Default `Date.now`. */
  readonly wallClock?: () => number;
  /**
   * Console logouts, shared by the coordinators through etcd (createCoordinator passes them);
   * default: this process's own.
   */
  readonly consoleRevocations?: ConsoleRevocations;
  /** Console login throttling per client address. Default 5 free attempts, 1 s doubling to 5 min. */
  readonly consoleLogin?: ConsoleLoginLimits;
}

export function createHttpServer(options: HttpOptions): FastifyInstance {
  const app = Fastify({
    ...(options.https === undefined ? {} : { https: options.https }),
    logger: false,
    bodyLimit: options.maxPayloadBytes,
    return503OnClosing: true,
    // Route on the canonical path (dot segments, doubled slashes), static parts case-insensitive.
    rewriteUrl: (req) => normalizePath(req.url ?? '/'),
    routerOptions: { caseSensitive: false, maxParamLength: 1_000 },
  });

  // JSON bodies: the hostile-input limits on the raw text first, then the default (prototype-safe)
  // parser. A refused body is 400 INVALID_MESSAGE before anything reads it.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const limits = {
    maxDepth: options.maxJsonDepth ?? DEFAULT_JSON_LIMITS.maxDepth,
    maxEntries: DEFAULT_JSON_LIMITS.maxEntries,
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const problem = jsonLimitProblem(body as string, limits);
    if (problem !== undefined) {
      done(new LeaseholdError('INVALID_MESSAGE', problem), undefined);
      return;
    }
    void parseJson(req, body as string, done);
  });

  app.setErrorHandler((err: { code?: string; statusCode?: number; message: string }, _req, reply) => {
    if (err instanceof LeaseholdError) return sendError(reply, err.code, err.message);
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendError(reply, 'PAYLOAD_TOO_LARGE', 'body too large');
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      return sendError(reply, 'INVALID_MESSAGE', err.message);
    }
    options.log.error({ err }, 'http handler failed');
    return sendError(reply, 'INTERNAL', 'internal error');
  });
  app.setNotFoundHandler((req, reply) => sendError(reply, 'NOT_FOUND', `no route ${req.method} ${req.url}`));

  const isAdmin = bearerCheck(options.adminKeys);
  const wallClock = options.wallClock ?? Date.now;
  const revocations =
    options.consoleRevocations ?? new ConsoleRevocations({ store: undefined, wallClock, log: options.log });
  /** The live console login a request's cookie names: signed, canonical, unexpired, not logged out. */
  const consoleSessionOf = (req: FastifyRequest): ConsoleSession | undefined => {
    const session = decodeConsoleSession(
      readCookie(req.headers.cookie, CONSOLE_COOKIE),
      options.adminKeys,
      wallClock(),
    );
    return session !== undefined && revocations.accepts(session.id) ? session : undefined;
  };
  installRouteAuth(app, {
    checks: {
      admin: (req) => isAdmin(req.headers.authorization),
      // The console's cookie opens only the console's routes; the /v1 API still takes only the key.
      console: (req) => isAdmin(req.headers.authorization) || consoleSessionOf(req) !== undefined,
    },
    log: options.log,
  });

  const open = { config: { credential: Credential.NONE } };
  app.get('/healthz', open, () => ({ status: 'ok' }));
  app.get('/readyz', open, async (_req, reply) => {
    const report = await options.readiness();
    return reply.code(report.ready ? 200 : 503).send(report);
  });
  app.get('/metrics', open, async (_req, reply) => {
    const body = await options.metrics.registry.metrics();
    return reply.header('content-type', options.metrics.registry.contentType).send(body);
  });

  registerTaskRoutes(app, options.tasks);
  if (options.events !== undefined) registerEventRoutes(app, options.events, options.log);
  registerConsoleRoutes(app, {
    adminKeys: options.adminKeys,
    sessionOf: consoleSessionOf,
    revocations,
    login: options.consoleLogin ?? DEFAULT_CONSOLE_LOGIN_LIMITS,
    tasks: options.tasks,
    readModel: options.console,
    secure: options.https !== undefined,
    wallClock,
    log: options.log,
  });
  return app;
}
