/**
 * POST /v1/fences/advance        (coordinator key)  AdvanceRequest  -> 200 AdvanceResponse | 409 STALE_TOKEN
 * POST /v1/fences/advance-batch  (coordinator key)  AdvanceBatchRequest -> 200 AdvanceBatchResponse
 *
 * Both are durable when answered: the advance is committed (group commit) before the reply.
 * A batch answers each item (mixed outcomes) with 200; only the request as a whole can fail.
 */
import {
  AdvanceBatchRequestSchema,
  AdvanceRequestSchema,
  formatToken,
  parseToken,
  type AdvanceBatchItemResult,
  type AdvanceBatchResponse,
  type AdvanceDecision,
  type AdvanceResponse,
} from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import type { FencedService } from '../service/fenced-service.js';
import { authenticate, type KeyRing } from './auth.js';
import { describeIssues, sendError } from './replies.js';

export interface FenceRoutesOptions {
  readonly service: FencedService;
  readonly coordinatorRing: KeyRing;
  /** Read-only keys: refused with 403 instead of 401. */
  readonly readOnlyRing: KeyRing;
}

export function registerFenceRoutes(app: FastifyInstance, options: FenceRoutesOptions): void {
  const { service, coordinatorRing, readOnlyRing } = options;

  app.post('/v1/fences/advance', async (request, reply) => {
    if (!authenticate(request, reply, coordinatorRing, readOnlyRing)) return reply;
    const parsed = AdvanceRequestSchema.safeParse(request.body);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    const { resource, token } = parsed.data;
    const decision = await service.advance({ resource, token: parseToken(token) });
    if (!decision.ok) {
      return sendError(reply, decision.code, `token ${token} is below the fence of ${resource}`, decision.fence);
    }
    const body: AdvanceResponse = { resource, outcome: decision.outcome, fence: formatToken(decision.fence) };
    return reply.send(body);
  });

  app.post('/v1/fences/advance-batch', async (request, reply) => {
    if (!authenticate(request, reply, coordinatorRing, readOnlyRing)) return reply;
    const parsed = AdvanceBatchRequestSchema.safeParse(request.body);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    const items = parsed.data.items.map((i) => ({ resource: i.resource, token: parseToken(i.token) }));
    const decisions = await service.advanceBatch(items);
    const body: AdvanceBatchResponse = {
      results: decisions.map((d, at) => toBatchItem(items[at]?.resource ?? '', d)),
    };
    return reply.send(body);
  });
}

function toBatchItem(resource: string, decision: AdvanceDecision): AdvanceBatchItemResult {
  return decision.ok
    ? { ok: true, resource, outcome: decision.outcome, fence: formatToken(decision.fence) }
    : { ok: false, resource, code: decision.code, fence: formatToken(decision.fence) };
}
