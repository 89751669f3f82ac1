/**
 * POST /v1/fences/advance        (coordinator key)  AdvanceRequest  -> 200 AdvanceResponse | 409 STALE_TOKEN
 * POST /v1/fences/advance-batch  (coordinator key)  AdvanceBatchRequest -> 200 AdvanceBatchResponse
 *
 * POST /v1/probe                (coordinator key)  ProbeRequest -> 200 ProbeResponse (nothing stored)
 *
 * Both advances are durable when answered: the advance is committed (group commit) before the
 * reply. A batch answers each item (mixed outcomes) with 200; only the request as a whole can fail.
 * A batch's `vouch` (the coordinator's signature over the grants its items name) is checked once
 * while the advance commits; when it verifies, the write routes accept those capabilities for
 * their claims without verifying each (`CapabilityVerifier.vouched`). It never changes an advance.
 */
import {
  AdvanceBatchRequestSchema,
  AdvanceRequestSchema,
  formatToken,
  parseToken,
  ProbeRequestSchema,
  RepeatGate,
  verifyCapability,
  type AdvanceBatchItem,
  type CapabilityPublicKey,
  type VouchedGrant,
  type ProbeResponse,
  type AdvanceBatchItemResult,
  type AdvanceBatchResponse,
  type AdvanceDecision,
  type AdvanceResponse,
} from '@leasehold/protocol';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { SinkMetrics } from '../metrics.js';
import type { FencedService } from '../service/fenced-service.js';
import type { CapabilityVerifier } from './capability-cache.js';
import { describeIssues, sendError } from './replies.js';
import { Credential } from './route-auth.js';
import { markDecision, traced } from './tracing.js';

export interface FenceRoutesOptions {
  readonly service: FencedService;
  /** The public keys capabilities are verified with (for the probe). */
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
  /** The write routes' capability checks, filled here from vouches. */
  readonly capabilities: CapabilityVerifier;
  readonly metrics: SinkMetrics;
}

const coordinatorOnly = { config: { credential: Credential.COORDINATOR } };

export function registerFenceRoutes(app: FastifyInstance, options: FenceRoutesOptions): void {
  const { service, capabilities, metrics } = options;
  const invalidVouches = new RepeatGate();

  /** Remember the vouched grants (a vouch that does not verify changes nothing but a counter and a log line). */
  function checkVouch(vouch: string, wire: readonly AdvanceBatchItem[], request: FastifyRequest): void {
    const grants: VouchedGrant[] = wire.flatMap(({ resource, token, grant }) =>
      grant === undefined ? [] : [{ resource, token: parseToken(token), ...grant }],
    );
    const ok = capabilities.vouched(vouch, grants);
    metrics.vouchedGrants.inc({ result: ok ? 'accepted' : 'invalid' }, grants.length);
    if (!ok) {
      const gate = invalidVouches.note('vouch', Date.now());
      if (gate.log) {
        request.log.warn(
          { remote: request.ip, grants: grants.length, repeated: gate.suppressed },
          'advance vouch does not verify under CAPABILITY_PUBLIC_KEYS: ignored (the writes verify their capabilities)',
        );
      }
    }
  }

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
      const deciding = service.advanceBatch(items);
      // While the advance commits: the vouch, one Ed25519 verification for every grant it lists.
      const { vouch } = parsed.data;
      if (vouch !== undefined) checkVouch(vouch, parsed.data.items, request);
      const decisions = await deciding;
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
