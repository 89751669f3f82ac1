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
import { describeIssues, sendError } from './replies.js';
import { Credential } from './route-auth.js';

export interface FenceRoutesOptions {
  readonly service: FencedService;
}

const coordinatorOnly = { config: { credential: Credential.COORDINATOR } };

export function registerFenceRoutes(app: FastifyInstance, options: FenceRoutesOptions): void {
  const { service } = options;

  app.post('/v1/fences/advance', coordinatorOnly, async (request, reply) => {
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

  app.post('/v1/fences/advance-batch', coordinatorOnly, async (request, reply) => {
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
