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
 * POST /v1/writes/batch  (a capability in each item)  WriteBatchRequest -> 200 WriteBatchResponse
 *   body not a JSON object, `items` not an array of 1..MAX_WRITE_BATCH_ITEMS, other keys
 *                                         -> 400 INVALID_MESSAGE (nothing decided)
 * Otherwise every item is decided by the same steps as one `POST /v1/writes` (its own checks,
 * its own atomic, durable decision; the items of one request usually share a group commit) and
 * answered in order with what that request would have replied; the reply follows every commit.
 * An item may carry `traceparent`: its `leasehold.sink.decide` span continues it.
 *
 * Hot path: a valid body is recognised by `checkWriteHead` (no zod) and a capability that verified
 * before, or that the grant's fence advance vouched for, for the same claims is found in a bounded
 * cache (`CapabilityVerifier`); everything else takes the full schema and a full Ed25519 check,
 * with the same refusals as before.
 */
import {
  MAX_WRITE_BATCH_ITEMS,
  RefusalCodeSchema,
  WriteRequestSchema,
  canonicalJsonOfParsed,
  canonicalJson,
  formatToken,
  parseToken,
  type ErrorCode,
  type JsonValue,
  type RefusalCode,
  type WriteBatchItemResult,
  type WriteBatchResponse,
  type WriteResponse,
} from '@leasehold/protocol';
import type { Span } from '@opentelemetry/api';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RefusalFeed } from '../events/refusal-feed.js';
import type { SinkMetrics } from '../metrics.js';
import type { FencedService } from '../service/fenced-service.js';
import type { CapabilityVerifier } from './capability-cache.js';
import { describeIssues, errorBody, sendError } from './replies.js';
import { claimsOf } from './routes-events.js';
import { Credential } from './route-auth.js';
import { markDecision, traced, tracedItem } from './tracing.js';
import { checkWriteHead, WriteHeadSchema, type WriteHead } from './write-body.js';

export interface WriteRoutesOptions {
  readonly service: FencedService;
  readonly metrics: SinkMetrics;
  /** Where refusals before the store are published: a batch item's refusal is one event (its claims). */
  readonly refusals?: RefusalFeed;
  /** The capability checks, shared with the advance route (which fills it from vouches). */
  readonly capabilities: CapabilityVerifier;
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

/** What one write decided: the 200 body, or an error (its code, message and fence) for the caller to send. */
type WriteAnswer =
  | { readonly ok: true; readonly response: WriteResponse }
  | { readonly ok: false; readonly code: ErrorCode; readonly message: string; readonly fence?: bigint };

const refuse = (code: ErrorCode, message: string, fence?: bigint): WriteAnswer =>
  fence === undefined ? { ok: false, code, message } : { ok: false, code, message, fence };

export function registerWriteRoutes(app: FastifyInstance, options: WriteRoutesOptions): void {
  const { service, metrics, refusals } = options;
  const { capabilities } = options;

  /** One write, as `POST /v1/writes` decides it (`route` names where it came, for the logs). */
  async function decide(body: unknown, request: FastifyRequest, span: Span, route: string): Promise<WriteAnswer> {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      markDecision(span, 'INVALID_MESSAGE');
      return refuse('INVALID_MESSAGE', 'body must be a JSON object');
    }
    if (typeof (body as { capability?: unknown }).capability !== 'string') {
      request.log.warn({ remote: request.ip, credential: 'capability', route }, 'write refused: missing capability');
      markDecision(span, 'UNAUTHENTICATED');
      return refuse('UNAUTHENTICATED', 'missing write capability');
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
        return refuse('INVALID_MESSAGE', describeIssues(parsed.error));
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
    const checked = capabilities.check(w.capability, claims, token);
    metrics.capabilityChecks.inc({ result: checked });
    if (checked === 'refused') {
      metrics.writes.inc({ outcome: 'forbidden' });
      request.log.warn(
        {
          remote: request.ip,
          credential: 'capability',
          route,
          resource: w.resource,
          token: w.token,
          workerId: w.workerId,
        },
        'write refused: capability does not verify',
      );
      markDecision(span, 'FORBIDDEN');
      return refuse('FORBIDDEN', 'capability does not match (resource, token, workerId, incarnation)');
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
      return refuse(decision.code, REFUSAL_TEXT[decision.code], decision.fence);
    }
    markDecision(span, decision.outcome, formatToken(decision.fence));
    return {
      ok: true,
      response: {
        resource: w.resource,
        resultId: w.resultId,
        outcome: decision.outcome,
        fence: formatToken(decision.fence),
      },
    };
  }

  const route = { config: { credential: Credential.CAPABILITY } };
  app.post('/v1/writes', route, (request, reply) =>
    traced(request, 'leasehold.sink.decide', async (span): Promise<FastifyReply> => {
      const answer = await decide(request.body, request, span, '/v1/writes');
      return answer.ok ? reply.send(answer.response) : sendError(reply, answer.code, answer.message, answer.fence);
    }),
  );

  app.post('/v1/writes/batch', route, async (request, reply) => {
    const items = batchItems(request.body);
    if (typeof items === 'string') return sendError(reply, 'INVALID_MESSAGE', items);
    // `decide` awaits nothing before `service.write`, so the items reach the group committer in
    // item order and two items on one resource are decided in that order.
    const answers = await Promise.all(
      items.map((item) => {
        const { traceparent, write } = splitItem(item);
        const parent = typeof traceparent === 'string' ? traceparent : undefined;
        return tracedItem(parent, request, 'leasehold.sink.decide', (span): Promise<WriteAnswer> | WriteAnswer => {
          if (traceparent === undefined || parent !== undefined)
            return decide(write, request, span, '/v1/writes/batch');
          markDecision(span, 'INVALID_MESSAGE');
          return refuse('INVALID_MESSAGE', 'traceparent: must be a string');
        });
      }),
    );
    // Refusals before the store, one event per item, in item order (with that item's claims).
    if (refusals?.listening === true) {
      answers.forEach((answer, i) => {
        if (!answer.ok && isRefusalCode(answer.code)) {
          refusals.publish({ route: '/v1/writes/batch', code: answer.code, remote: request.ip, ...claimsOf(items[i]) });
        }
      });
    }
    const results = answers.map(itemResult);
    metrics.writeBatchItems.observe(items.length);
    const response: WriteBatchResponse = { results };
    return reply.send(response);
  });
}

/** An item's `traceparent`, and the write request without it (anything but an object is left as it is). */
function splitItem(item: unknown): { traceparent: unknown; write: unknown } {
  if (typeof item !== 'object' || item === null || Array.isArray(item)) return { traceparent: undefined, write: item };
  const { traceparent, ...write } = item as { traceparent?: unknown };
  return { traceparent, write };
}

/** The items of a batch body, or why the body is refused as a whole. */
function batchItems(body: unknown): readonly unknown[] | string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return 'body must be a JSON object';
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'items') return 'body must be { "items": [...] } and nothing else';
  const items = (body as { items: unknown }).items;
  if (!Array.isArray(items)) return 'items: must be an array';
  const list: readonly unknown[] = items;
  if (items.length === 0 || items.length > MAX_WRITE_BATCH_ITEMS) {
    return `items: must hold 1 to ${MAX_WRITE_BATCH_ITEMS} writes (got ${items.length})`;
  }
  return list;
}

const isRefusalCode = (code: ErrorCode): code is RefusalCode => RefusalCodeSchema.safeParse(code).success;

function itemResult(answer: WriteAnswer): WriteBatchItemResult {
  if (answer.ok) return { ok: true, ...answer.response };
  const { type: _type, ...error } = errorBody(answer.code, answer.message, answer.fence);
  return { ok: false, ...error };
}
