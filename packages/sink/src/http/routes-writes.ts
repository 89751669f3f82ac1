/**
 * POST /v1/writes  (capability in the body)  WriteRequest -> 200 WriteResponse
 *                                            | 409 STALE_TOKEN / FENCE_CONFLICT / RESULT_CONFLICT (with fence)
 *
 * Checks, in order, each refusing with nothing changed:
 *   body not a JSON object                -> 400 INVALID_MESSAGE
 *   no `capability` string                -> 401 UNAUTHENTICATED
 *   schema (ids, token, payload)          -> 400 INVALID_MESSAGE
 *   capability does not verify for (resource, token, workerId, incarnation) under any live public key
 *                                         -> 403 FORBIDDEN (a correct token alone is not enough)
 * Then the fence rule decides, inside one group-commit transaction, and the reply follows the commit.
 *
 * Hot path: a valid body is recognised by `checkWriteHead` (no zod) and a capability that verified
 * before for the same claims is found in a bounded cache (`CapabilityVerifier`); everything else
 * takes the full schema and a full Ed25519 check, with the same refusals as before.
 */
import {
  WriteRequestSchema,
  canonicalJsonOfParsed,
  canonicalJson,
  formatToken,
  parseToken,
  type CapabilityPublicKey,
  type JsonValue,
  type WriteResponse,
} from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import type { SinkMetrics } from '../metrics.js';
import type { FencedService } from '../service/fenced-service.js';
import { CapabilityVerifier } from './capability-cache.js';
import { describeIssues, sendError } from './replies.js';
import { Credential } from './route-auth.js';
import { markDecision, traced } from './tracing.js';
import { checkWriteHead, WriteHeadSchema, type WriteHead } from './write-body.js';

export interface WriteRoutesOptions {
  readonly service: FencedService;
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
  readonly metrics: SinkMetrics;
  /** Successful capability checks remembered (exact capability string + claims); 0 disables. */
  readonly capabilityCacheEntries?: number;
}

const REFUSAL_TEXT = {
  STALE_TOKEN: 'token is below the fence: a newer holder exists',
  FENCE_CONFLICT: 'token is above the fence: it was never advanced here',
  RESULT_CONFLICT: 'result id already stored with a different payload',
} as const;

/** `checkWriteHead` (hand-written, the common case), else zod; then the payload in one pass. */
function headOf(body: Record<string, unknown>): WriteHead | undefined {
  const fast = checkWriteHead(body);
  if (fast !== undefined) return fast;
  const head = WriteHeadSchema.safeParse(body);
  return head.success ? head.data : undefined;
}

export function registerWriteRoutes(app: FastifyInstance, options: WriteRoutesOptions): void {
  const { service, metrics } = options;
  const capabilities = new CapabilityVerifier(options.capabilityPublicKeys, options.capabilityCacheEntries);

  const route = { config: { credential: Credential.CAPABILITY } };
  app.post('/v1/writes', route, (request, reply) =>
    traced(request, 'leasehold.sink.decide', async (span) => {
      const body: unknown = request.body;
      if (typeof body !== 'object' || body === null || Array.isArray(body)) {
        markDecision(span, 'INVALID_MESSAGE');
        return sendError(reply, 'INVALID_MESSAGE', 'body must be a JSON object');
      }
      if (typeof (body as { capability?: unknown }).capability !== 'string') {
        request.log.warn(
          { remote: request.ip, credential: 'capability', route: '/v1/writes' },
          'write refused: missing capability',
        );
        markDecision(span, 'UNAUTHENTICATED');
        return sendError(reply, 'UNAUTHENTICATED', 'missing write capability');
      }
      const head = headOf(body as Record<string, unknown>);
      let canonicalPayload = head === undefined ? undefined : canonicalJsonOfParsed(head.payload);
      let w: WriteHead;
      if (head !== undefined && canonicalPayload !== undefined) {
        w = head;
      } else {
        const parsed = WriteRequestSchema.safeParse(body);
        if (!parsed.success) {
          markDecision(span, 'INVALID_MESSAGE');
          return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
        }
        w = parsed.data;
        canonicalPayload = canonicalJson(w.payload);
      }
      span.setAttributes({
        'leasehold.resource': w.resource,
        'leasehold.token': w.token,
        'leasehold.result_id': w.resultId,
        'leasehold.worker_id': w.workerId,
      });
      const token = parseToken(w.token);
      const claims = { resource: w.resource, token: w.token, workerId: w.workerId, incarnation: w.incarnation };
      if (!capabilities.verify(w.capability, claims, token)) {
        metrics.writes.inc({ outcome: 'forbidden' });
        request.log.warn(
          {
            remote: request.ip,
            credential: 'capability',
            route: '/v1/writes',
            resource: w.resource,
            token: w.token,
            workerId: w.workerId,
          },
          'write refused: capability does not verify',
        );
        markDecision(span, 'FORBIDDEN');
        return sendError(reply, 'FORBIDDEN', 'capability does not match (resource, token, workerId, incarnation)');
      }
      const decision = await service.write({
        resource: w.resource,
        token,
        resultId: w.resultId,
        workerId: w.workerId,
        payload: w.payload as JsonValue,
        canonicalPayload,
      });
      if (!decision.ok) {
        markDecision(span, decision.code, formatToken(decision.fence));
        return sendError(reply, decision.code, REFUSAL_TEXT[decision.code], decision.fence);
      }
      markDecision(span, decision.outcome, formatToken(decision.fence));
      const response: WriteResponse = {
        resource: w.resource,
        resultId: w.resultId,
        outcome: decision.outcome,
        fence: formatToken(decision.fence),
      };
      return reply.send(response);
    }),
  );
}
