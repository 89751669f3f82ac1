/**
 * Reads (coordinator key or read-only key):
 *   GET /v1/resources/:resource                    -> 200 ResourceView (fence "0" and no results if never seen)
 *   GET /v1/resources/:resource/results/:resultId  -> 200 StoredResult | 404 NOT_FOUND
 *   GET /v1/decisions?after=SEQ&limit=N            -> 200 DecisionPage (after default 0, limit 1..1000, default 100)
 * Resource and result ids may contain `/`: clients percent-encode them as one path segment.
 */
import {
  ResourceIdSchema,
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
    const parsed = ResourceParamsSchema.safeParse(request.params);
    if (!parsed.success) return sendError(reply, 'INVALID_MESSAGE', describeIssues(parsed.error));
    const rows = await service.resource(parsed.data.resource);
    const body: ResourceView = {
      resource: rows.resource,
      fence: formatToken(rows.fence),
      results: rows.results.map(toStoredResult),
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
    const page = await service.decisions(parsed.data.after, parsed.data.limit);
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
