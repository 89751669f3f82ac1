/**
 * POST /v1/fences/advance        (coordinator key)  AdvanceRequest  -> 200 AdvanceResponse | 409 STALE_TOKEN
 * POST /v1/fences/advance-batch  (coordinator key)  AdvanceBatchRequest -> 200 AdvanceBatchResponse
 *
 * POST /v1/probe                (coordinator key)  ProbeRequest -> 200 ProbeResponse (nothing stored)
 *
 * Both advances are durable when answered: the advance is committed (group commit) before the
 * reply. A batch answers each item (mixed outcomes) with 200; only the request as a whole can fail.
 */
import {
  AdvanceBatchRequestSchema,
  AdvanceRequestSchema,
  formatToken,
  parseToken,
  ProbeRequestSchema,
  verifyCapability,
  type CapabilityKey,
  type ProbeResponse,
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
  /** The keys capabilities are verified with (for the probe). */
  readonly capabilityKeys: readonly CapabilityKey[];
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

  app.post('/v1/probe', coordinatorOnly, (request, reply) => {
    const parsed = ProbeRequestSchema.safeParse(request.body);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    return reply.send(probeCapability(options.capabilityKeys, parsed.data));
  });
}

/** The coordinator's readiness probe: would this sink accept capabilities it signs? */
function probeCapability(
  keys: readonly CapabilityKey[],
  body: ReturnType<typeof ProbeRequestSchema.parse>,
): ProbeResponse {
  const keyId = body.capability.split('.')[1] ?? '';
  const claims = { ...body.claims, token: parseToken(body.claims.token) };
  const capability = verifyCapability(keys, body.capability, claims)
    ? 'ok'
    : keys.some((k) => k.id === keyId)
      ? 'mismatch'
      : 'unknown-key';
  return { coordinatorKey: 'ok', capability, keyId };
}

function toBatchItem(resource: string, decision: AdvanceDecision): AdvanceBatchItemResult {
  return decision.ok
    ? { ok: true, resource, outcome: decision.outcome, fence: formatToken(decision.fence) }
    : { ok: false, resource, code: decision.code, fence: formatToken(decision.fence) };
}
