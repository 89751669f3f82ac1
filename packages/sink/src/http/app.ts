/**
 * The sink's fastify app: routes under /v1, health, readiness, metrics, and our error bodies
 * everywhere. Auth:
 *   - advances: `Authorization: Bearer <coordinator key>`
 *   - writes: the grant's capability in the body (no bearer key needed)
 *   - reads, the decision log and the event stream: a coordinator key or a read-only key
 *   - /healthz, /readyz, /metrics: open (bind to loopback or firewall them)
 */
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import {
  DEFAULT_JSON_LIMITS,
  jsonLimitProblem,
  LeaseholdError,
  normalizePath,
  type CapabilityPublicKey,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { SinkMetrics } from '../metrics.js';
import type { FencedService } from '../service/fenced-service.js';
import { createKeyRing } from './auth.js';
import { installErrorHandling, onClientError, onFrameworkError, sendError } from './replies.js';
import { CapabilityVerifier } from './capability-cache.js';
import { registerFenceRoutes } from './routes-fences.js';
import { registerReadRoutes } from './routes-read.js';
import { registerWriteRoutes } from './routes-writes.js';
import { installRefusalPublishing, registerEventRoutes } from './routes-events.js';
import type { EventStreams } from '../events/event-streams.js';
import type { RefusalFeed } from '../events/refusal-feed.js';
import { Credential, installRouteAuth } from './route-auth.js';

export interface HttpAppOptions {
  /** Serve HTTPS with this certificate and key; plain HTTP without. */
  readonly https?: { readonly cert: Buffer; readonly key: Buffer };
  /** Deepest JSON nesting accepted in a body (checked on the raw text before parsing). Default 64. */
  readonly maxJsonDepth?: number;
  readonly service: FencedService;
  readonly metrics: SinkMetrics;
  readonly logger: Logger;
  readonly coordinatorKeys: readonly string[];
  readonly readKeys: readonly string[];
  /** Public keys that verify write capabilities (the sink can check them, never make them). */
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
  /** Capability checks remembered (`CAPABILITY_CACHE_ENTRIES`); default `DEFAULT_CAPABILITY_CACHE_ENTRIES` (16384). */
  readonly capabilityCacheEntries?: number;
  readonly bodyLimitBytes: number;
  /** True once shutdown began: new requests get 503 SHUTTING_DOWN. */
  readonly isClosing: () => boolean;
  /** The push channel (`GET /v1/events`) and where refusals are published; no route without it. */
  readonly events?: { readonly streams: EventStreams; readonly refusals: RefusalFeed };
}

export function buildHttpApp(options: HttpAppOptions): FastifyInstance {
  const { service, metrics } = options;
  const app = Fastify({
    ...(options.https === undefined ? {} : { https: { cert: options.https.cert, key: options.https.key } }),
    loggerInstance: options.logger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimitBytes,
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    keepAliveTimeout: 72_000,
    // Route on the canonical path (dot segments, doubled slashes), static parts case-insensitive;
    // auth comes from the matched route (route-auth.ts), never from the URL text.
    rewriteUrl: (req) => normalizePath(req.url ?? '/'),
    routerOptions: { maxParamLength: 1000, caseSensitive: false },
    frameworkErrors: onFrameworkError,
    clientErrorHandler: onClientError,
  }) as unknown as FastifyInstance;
  installErrorHandling(app);

  // JSON bodies: the hostile-input limits on the raw text first (no recursive code sees a body
  // nested deeper than the limit), then the default prototype-safe parser.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const limits = {
    maxDepth: options.maxJsonDepth ?? DEFAULT_JSON_LIMITS.maxDepth,
    maxEntries: DEFAULT_JSON_LIMITS.maxEntries,
  };
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const problem = jsonLimitProblem(body as string, limits);
    if (problem !== undefined) {
      done(new LeaseholdError('INVALID_MESSAGE', problem), undefined);
      return;
    }
    void parseJson(request, body as string, done);
  });

  // Request metrics by route template (bounded label values: never the raw URL) and status. The
  // event stream is counted when it ends; its duration is the stream's life, so it is left out.
  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    const route = request.is404 ? 'unmatched' : (request.routeOptions.url ?? 'unmatched');
    metrics.httpRequests.inc({ route, status: String(reply.statusCode) });
    if (route !== '/v1/events') metrics.httpRequestSeconds.observe({ route }, reply.elapsedTime / 1_000);
    done();
  });

  app.addHook('onRequest', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (options.isClosing() && request.routeOptions.url !== '/healthz') {
      void reply.header('connection', 'close');
      void sendError(reply, 'SHUTTING_DOWN', 'the sink is shutting down');
      return;
    }
    done();
  });

  installRouteAuth(app, {
    coordinator: createKeyRing(options.coordinatorKeys),
    read: createKeyRing([...options.coordinatorKeys, ...options.readKeys]),
    readOnly: createKeyRing(options.readKeys),
  });
  if (options.events !== undefined) installRefusalPublishing(app, options.events.refusals);
  // One cache of capability checks: the advance route fills it from vouches, the write routes read it.
  const capabilities = new CapabilityVerifier(options.capabilityPublicKeys, options.capabilityCacheEntries);
  registerFenceRoutes(app, { service, capabilityPublicKeys: options.capabilityPublicKeys, capabilities, metrics });
  registerWriteRoutes(app, {
    service,
    capabilities,
    metrics,
    ...(options.events === undefined ? {} : { refusals: options.events.refusals }),
  });
  registerReadRoutes(app, { service });
  if (options.events !== undefined) registerEventRoutes(app, { streams: options.events.streams });

  const open = { config: { credential: Credential.NONE } };
  app.get('/healthz', open, (_request, reply) => reply.send({ status: 'ok' }));
  app.get('/readyz', open, (_request, reply) => {
    if (options.isClosing() || service.closing) return sendError(reply, 'SHUTTING_DOWN', 'shutting down');
    if (!service.store.isOpen()) return sendError(reply, 'UNAVAILABLE', 'store is closed');
    return reply.send({ status: 'ready' });
  });
  app.get('/metrics', open, async (_request, reply) => {
    const text = await metrics.registry.metrics();
    return reply.header('content-type', metrics.registry.contentType).send(text);
  });
  return app;
}
