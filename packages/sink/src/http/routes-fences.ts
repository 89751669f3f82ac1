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
  type CapabilityPublicKey,
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
import { markDecision, traced } from './tracing.js';

export interface FenceRoutesOptions {
  readonly service: FencedService;
  /** The public keys capabilities are verified with (for the probe). */
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
}

const coordinatorOnly = { config: { credential: Credential.COORDINATOR } };

export function registerFenceRoutes(app: FastifyInstance, options: FenceRoutesOptions): void {
  const { service } = options;

  app.post('/v1/fences/advance', coordinatorOnly, (request, reply) =>
    traced(request, 'leasehold.sink.advance', async (span) => {
      const parsed = AdvanceRequestSchema.safeParse(request.body);
      if (!parsed.success) {
        markDecision(span, 'INVALID_MESSAGE');
        return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
      }
      const { resource, token } = parsed.data;
      span.setAttributes({ 'leasehold.resource': resource, 'leasehold.token': token });
      const decision = await service.advance({ resource, token: parseToken(token) });
      markDecision(span, decision.ok ? decision.outcome : decision.code, formatToken(decision.fence));
      if (!decision.ok) {
        return sendError(reply, decision.code, `token ${token} is below the fence of ${resource}`, decision.fence);
      }
      const body: AdvanceResponse = { resource, outcome: decision.outcome, fence: formatToken(decision.fence) };
      return reply.send(body);
    }),
  );

  app.post('/v1/fences/advance-batch', coordinatorOnly, (request, reply) =>
    traced(request, 'leasehold.sink.advance', async (span) => {
      const parsed = AdvanceBatchRequestSchema.safeParse(request.body);
      if (!parsed.success) {
        markDecision(span, 'INVALID_MESSAGE');
        return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
      }
      const items = parsed.data.items.map((i) => ({ resource: i.resource, token: parseToken(i.token) }));
      span.setAttribute('leasehold.advance_count', items.length);
      const decisions = await service.advanceBatch(items);
      const [only] = parsed.data.items;
      const [decided] = decisions;
      if (items.length === 1 && only !== undefined && decided !== undefined) {
        // One advance (the usual grant): its decision on the span, as for /v1/fences/advance.
        span.setAttributes({ 'leasehold.resource': only.resource, 'leasehold.token': only.token });
        markDecision(span, decided.ok ? decided.outcome : decided.code, formatToken(decided.fence));
      }
      const body: AdvanceBatchResponse = {
        results: decisions.map((d, at) => toBatchItem(items[at]?.resource ?? '', d)),
      };
      return reply.send(body);
    }),
  );

  app.post('/v1/probe', coordinatorOnly, (request, reply) => {
    const parsed = ProbeRequestSchema.safeParse(request.body);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    return reply.send(probeCapability(options.capabilityPublicKeys, parsed.data));
  });
}

/** The coordinator's readiness probe: would this sink accept capabilities it signs? */
function probeCapability(
  keys: readonly CapabilityPublicKey[],
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
