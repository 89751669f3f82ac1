/**
 * POST /v1/writes  (capability in the body)  WriteRequest -> 200 WriteResponse
 *                                            | 409 STALE_TOKEN / FENCE_CONFLICT / RESULT_CONFLICT (with fence)
 *
 * Checks, in order, each refusing with nothing changed:
 *   body not a JSON object                -> 400 INVALID_MESSAGE
 *   no `capability` string                -> 401 UNAUTHENTICATED
 *   schema (ids, token, payload)          -> 400 INVALID_MESSAGE
 *   capability does not verify for (resource, token, workerId, incarnation) under any live key
 *                                         -> 403 FORBIDDEN (a correct token alone is not enough)
 * Then the fence rule decides, inside one group-commit transaction, and the reply follows the commit.
 */
import {
  WriteRequestSchema,
  canonicalJsonOfParsed,
  canonicalJson,
  formatToken,
  parseToken,
  verifyCapability,
  type CapabilityKey,
  type WriteRequest,
  type WriteResponse,
} from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { SinkMetrics } from '../metrics.js';
import type { FencedService } from '../service/fenced-service.js';
import { describeIssues, sendError } from './replies.js';

export interface WriteRoutesOptions {
  readonly service: FencedService;
  readonly capabilityKeys: readonly CapabilityKey[];
  readonly metrics: SinkMetrics;
}

const REFUSAL_TEXT = {
  STALE_TOKEN: 'token is below the fence: a newer holder exists',
  FENCE_CONFLICT: 'token is above the fence: it was never advanced here',
  RESULT_CONFLICT: 'result id already stored with a different payload',
} as const;

/**
 * The write request's fields without the payload: the payload (already parsed JSON) is checked and
 * canonicalized in one pass by `canonicalJsonOfParsed`, which accepts exactly what the full schema's
 * `z.json()` accepts; on any refusal the full schema runs again to describe the problem.
 */
const WriteHeadSchema = WriteRequestSchema.extend({ payload: z.unknown() });

export function registerWriteRoutes(app: FastifyInstance, options: WriteRoutesOptions): void {
  const { service, capabilityKeys, metrics } = options;

  app.post('/v1/writes', async (request, reply) => {
    const body: unknown = request.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return sendError(reply, 'INVALID_MESSAGE', 'body must be a JSON object');
    }
    if (typeof (body as { capability?: unknown }).capability !== 'string') {
      return sendError(reply, 'UNAUTHENTICATED', 'missing write capability');
    }
    const head = WriteHeadSchema.safeParse(body);
    let canonicalPayload = head.success ? canonicalJsonOfParsed(head.data.payload) : undefined;
    let w: WriteRequest;
    if (head.success && canonicalPayload !== undefined) {
      w = head.data as WriteRequest;
    } else {
      const parsed = WriteRequestSchema.safeParse(body);
      if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
      w = parsed.data;
      canonicalPayload = canonicalJson(w.payload);
    }
    const token = parseToken(w.token);
    const claims = { resource: w.resource, token, workerId: w.workerId, incarnation: w.incarnation };
    if (!verifyCapability(capabilityKeys, w.capability, claims)) {
      metrics.writes.inc({ outcome: 'FORBIDDEN' });
      request.log.warn({ resource: w.resource, token: w.token, workerId: w.workerId }, 'write capability refused');
      return sendError(reply, 'FORBIDDEN', 'capability does not match (resource, token, workerId, incarnation)');
    }
    const decision = await service.write({
      resource: w.resource,
      token,
      resultId: w.resultId,
      workerId: w.workerId,
      payload: w.payload,
      canonicalPayload,
    });
    if (!decision.ok) return sendError(reply, decision.code, REFUSAL_TEXT[decision.code], decision.fence);
    const response: WriteResponse = {
      resource: w.resource,
      resultId: w.resultId,
      outcome: decision.outcome,
      fence: formatToken(decision.fence),
    };
    return reply.send(response);
  });
}
