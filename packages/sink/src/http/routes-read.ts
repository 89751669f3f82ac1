/**
 * Reads (coordinator key or read-only key), each answer bounded by count and by bytes:
 *   GET /v1/resources/:resource[?after=CURSOR&limit=N]
 *        -> 200 ResourceView: one page of results in stored order, with the fence and `next`
 *           (after default "0", limit 0..1000, default 1000; at most READ_PAGE_MAX_BYTES, a single
 *           larger result alone); fence "0" and no results if never seen
 *   GET /v1/resources/:resource/results/:resultId  -> 200 StoredResult | 404 NOT_FOUND
 *        (one result: at most the body limit it was written under, plus its ids)
 *   GET /v1/decisions?after=SEQ&limit=N
 *        -> 200 DecisionPage (after default 0, limit 1..1000, default 100; within READ_PAGE_MAX_BYTES)
 * Resource and result ids may contain `/`: clients percent-encode them as one path segment. A bad
 * query (unknown parameter, malformed cursor, limit out of range) is 400 INVALID_MESSAGE.
 */
import {
  ResourceIdSchema,
  ResourcePageQuerySchema,
  ResultIdSchema,
  formatToken,
  type Decision,
  type DecisionPage,
  type JsonValue,
  type ResourceView,
  type StoredResult,
} from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { FencedService } from '../service/fenced-service.js';
import type { DecisionRow, StoredResultRow } from '../store/port.js';
import { describeIssues, sendError } from './replies.js';
import { Credential } from './route-auth.js';

export interface ReadRoutesOptions {
  readonly service: FencedService;
}

const reader = { config: { credential: Credential.READ } };

export const DECISION_PAGE_MAX = 1000;

const seqText = z
  .string()
  .regex(/^(0|[1-9][0-9]{0,14})$/, 'must be a non-negative decimal integer')
  .transform(Number);

const DecisionsQuerySchema = z.strictObject({
  after: seqText.default(0),
  limit: seqText.pipe(z.number().int().min(1).max(DECISION_PAGE_MAX)).default(100),
});

const ResourceParamsSchema = z.object({ resource: ResourceIdSchema });
const ResultParamsSchema = z.object({ resource: ResourceIdSchema, resultId: ResultIdSchema });

export function registerReadRoutes(app: FastifyInstance, options: ReadRoutesOptions): void {
  const { service } = options;

  app.get('/v1/resources/:resource', reader, async (request, reply) => {
    const params = ResourceParamsSchema.safeParse(request.params);
    if (!params.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(params.error));
    const query = ResourcePageQuerySchema.safeParse(request.query);
    if (!query.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(query.error));
    const page = await service.resourcePage(params.data.resource, {
      after: BigInt(query.data.after),
      limit: query.data.limit,
    });
    const body: ResourceView = {
      resource: page.resource,
      fence: formatToken(page.fence),
      results: page.results.map(toStoredResult),
      next: page.next.toString(),
      hasMore: page.hasMore,
    };
    return reply.send(body);
  });

  app.get('/v1/resources/:resource/results/:resultId', reader, async (request, reply) => {
    const parsed = ResultParamsSchema.safeParse(request.params);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    const row = await service.result(parsed.data.resource, parsed.data.resultId);
    if (row === undefined) return sendError(reply, 'NOT_FOUND', 'no such result');
    return reply.send(toStoredResult(row));
  });

  app.get('/v1/decisions', reader, async (request, reply) => {
    const parsed = DecisionsQuerySchema.safeParse(request.query);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    const page = await service.decisionPage(parsed.data.after, parsed.data.limit);
    const body: DecisionPage = {
      decisions: page.decisions.map(toDecision),
      next: page.next,
      oldestRetained: page.oldestRetained,
    };
    return reply.send(body);
  });
}

export function toStoredResult(row: StoredResultRow): StoredResult {
  return {
    resource: row.resource,
    resultId: row.resultId,
    token: formatToken(row.token),
    workerId: row.workerId,
    payload: JSON.parse(row.payload) as JsonValue,
    writtenAtMs: row.writtenAtMs,
  };
}

export function toDecision(row: DecisionRow): Decision {
  const decision: Decision = {
    seq: row.seq,
    kind: row.kind,
    resource: row.resource,
    token: formatToken(row.token),
    fenceBefore: formatToken(row.fenceBefore),
    outcome: row.outcome,
    atMs: row.atMs,
  };
  if (row.resultId !== undefined) decision.resultId = row.resultId;
  if (row.workerId !== undefined) decision.workerId = row.workerId;
  return decision;
}
