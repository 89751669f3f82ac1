/**
 * GET /v1/events  (coordinator key or read-only key)  -> 200 text/event-stream
 *
 * Resume point: the `Last-Event-ID` header (what an EventSource sends when it reconnects), else
 * `?after=SEQ`, else the end of the log (only what happens from now on). Both are decimal seqs;
 * anything else is 400 INVALID_MESSAGE, before the stream starts. More than `maxClients` streams
 * open: 429 LIMIT_REACHED with `Retry-After`, as the coordinator's streams (checked and counted in one synchronous step, see
 * events/event-streams.ts). Events: see SinkEventSchema in @leasehold/protocol and docs/protocol.md.
 *
 * Also here: the hook that publishes refusals of writes and advances (decided before the store)
 * to the streams, with the route, the code, and the resource / token / worker id of the body
 * when it parsed and they are valid.
 */
import {
  RefusalCodeSchema,
  RefusalRouteSchema,
  ResourceIdSchema,
  TokenSchema,
  WorkerIdSchema,
  type RefusalCode,
} from '@leasehold/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EventStreams } from '../events/event-streams.js';
import type { RefusalFeed, RefusalInput } from '../events/refusal-feed.js';
import { sendError } from './replies.js';
import { Credential } from './route-auth.js';

export interface EventRoutesOptions {
  readonly streams: EventStreams;
}

const SeqSchema = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,14})$/, 'must be a non-negative decimal integer')
  .transform(Number);

const EventsQuerySchema = z.strictObject({ after: SeqSchema.optional() });

export function registerEventRoutes(app: FastifyInstance, options: EventRoutesOptions): void {
  const { streams } = options;
  app.get('/v1/events', { config: { credential: Credential.READ } }, (request, reply) => {
    const query = EventsQuerySchema.safeParse(request.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', 'after: must be a non-negative decimal integer');
    const header = request.headers['last-event-id'];
    let after = query.data.after;
    if (header !== undefined) {
      const parsed = SeqSchema.safeParse(header);
      if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', 'Last-Event-ID must be a decimal seq');
      after = parsed.data;
    }
    // Checked and counted in this one synchronous step: no await may come between the two.
    const refused = streams.refusal();
    if (refused === 'closing') return sendError(reply, 'SHUTTING_DOWN', 'the sink is shutting down');
    if (refused === 'full') {
      request.log.warn({ remote: request.ip, max: streams.maxClients }, 'event stream refused: too many open');
      return sendError(reply, 'LIMIT_REACHED', `too many event streams open (${streams.maxClients})`);
    }
    void reply.hijack();
    streams.open(reply.raw, { after, remote: request.ip });
    return reply;
  });
}

const REFUSAL_STATUS = new Set([400, 401, 403, 413]);
const isRefusalRoute = (url: string | undefined) => RefusalRouteSchema.safeParse(url);

/** Publish the refusals of writes and advances (status 400/401/403/413) to `refusals`. */
export function installRefusalPublishing(app: FastifyInstance, refusals: RefusalFeed): void {
  app.addHook('onSend', (request: FastifyRequest, reply: FastifyReply, payload: unknown, done) => {
    if (refusals.listening && REFUSAL_STATUS.has(reply.statusCode)) {
      const route = isRefusalRoute(request.routeOptions.url);
      const code = codeOf(payload);
      if (route.success && code !== undefined) {
        refusals.publish({ route: route.data, code, remote: request.ip, ...claimsOf(request.body) });
      }
    }
    done(null, payload);
  });
}

function codeOf(payload: unknown): RefusalCode | undefined {
  if (typeof payload !== 'string' || payload.length > 4096) return undefined;
  try {
    const code = RefusalCodeSchema.safeParse((JSON.parse(payload) as { code?: unknown }).code);
    return code.success ? code.data : undefined;
  } catch {
    return undefined;
  }
}

/** The body's resource, token and worker id, each only when it is a valid value of its kind. */
export function claimsOf(body: unknown): Pick<RefusalInput, 'resource' | 'token' | 'workerId'> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return {};
  const b = body as Record<string, unknown>;
  const out: { resource?: string; token?: string; workerId?: string } = {};
  const resource = ResourceIdSchema.safeParse(b.resource);
  if (resource.success) out.resource = resource.data;
  const token = TokenSchema.safeParse(b.token);
  if (token.success) out.token = token.data;
  const workerId = WorkerIdSchema.safeParse(b.workerId);
  if (workerId.success) out.workerId = workerId.data;
  return out;
}
