/**
 * The HTTP side: the admin task API (`/v1/...`, admin bearer key) and the operational endpoints
 * (`/healthz`, `/readyz`, `/metrics`, unauthenticated). Every error body is the protocol's
 * ErrorMessage with the HTTP status of its code (400/401/404/409/413/503).
 */
import { normalizePath } from '@leasehold/protocol';
import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { LeaseholdError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { bearerCheck } from './auth.js';
import { sendError } from './send-error.js';
import { Credential, installRouteAuth } from './route-auth.js';
import { registerTaskRoutes, type TaskApi } from './routes-tasks.js';

export interface HttpOptions {
  readonly adminKeys: readonly string[];
  readonly maxPayloadBytes: number;
  readonly tasks: TaskApi;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** Readiness checks by name: etcd, sink, index. */
  readonly readiness: () => Promise<Record<string, boolean>>;
}

export function createHttpServer(options: HttpOptions): FastifyInstance {
  const app = Fastify({
    logger: false,
    bodyLimit: options.maxPayloadBytes,
    return503OnClosing: true,
    // Route on the canonical path (dot segments, doubled slashes), static parts case-insensitive.
    rewriteUrl: (req) => normalizePath(req.url ?? '/'),
    routerOptions: { caseSensitive: false, maxParamLength: 1_000 },
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
  installRouteAuth(app, { checks: { admin: (req) => isAdmin(req.headers.authorization) }, log: options.log });

  const open = { config: { credential: Credential.NONE } };
  app.get('/healthz', open, () => ({ status: 'ok' }));
  app.get('/readyz', open, async (_req, reply) => {
    const checks = await options.readiness();
    const ready = Object.values(checks).every(Boolean);
    return reply.code(ready ? 200 : 503).send({ ready, checks });
  });
  app.get('/metrics', open, async (_req, reply) => {
    const body = await options.metrics.registry.metrics();
    return reply.header('content-type', options.metrics.registry.contentType).send(body);
  });

  registerTaskRoutes(app, options.tasks);
  return app;
}
