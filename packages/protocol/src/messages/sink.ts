/**
 * HTTP bodies of the sink (the fenced write target). Paths are under `/v1`; see docs/protocol.md.
 * Every error response is an {@link ErrorMessageSchema} body with the status of its code.
 */
import { z } from 'zod';
import { IncarnationSchema, ResourceIdSchema, ResultIdSchema, WorkerIdSchema } from '../ids.js';
import { FENCE_PATTERN, FenceSchema, TokenSchema } from '../token.js';
import { ErrorCodeSchema, JsonValueSchema, TraceparentSchema } from './common.js';

/** POST /v1/fences/advance (coordinator key). Advance only grows the fence; the same token again is a no-op success. */
export const AdvanceRequestSchema = z.strictObject({
  resource: ResourceIdSchema,
  token: TokenSchema,
});
export type AdvanceRequest = z.infer<typeof AdvanceRequestSchema>;

export const AdvanceOutcomeSchema = z.enum(['advanced', 'unchanged']);

export const AdvanceResponseSchema = z.object({
  resource: ResourceIdSchema,
  outcome: AdvanceOutcomeSchema,
  fence: FenceSchema,
});
export type AdvanceResponse = z.infer<typeof AdvanceResponseSchema>;

/** The grant an advance is made for: who it goes to and the capability issued with it (for a vouch). */
export const AdvanceGrantSchema = z.strictObject({
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  capability: z.string().min(1).max(512),
});
export type AdvanceGrant = z.infer<typeof AdvanceGrantSchema>;

export const AdvanceBatchItemSchema = z.strictObject({
  resource: ResourceIdSchema,
  token: TokenSchema,
  grant: AdvanceGrantSchema.optional(),
});
export type AdvanceBatchItem = z.infer<typeof AdvanceBatchItemSchema>;

/**
 * POST /v1/fences/advance-batch (coordinator key): many advances in one durable commit. Items may
 * name the grant they are advanced for; `vouch` is then the coordinator's signature over those
 * grants, in item order (`signVouch`): a sink that verifies it accepts each listed capability for
 * its claims without verifying that capability again. `vouch` comes with at least one `grant` and
 * never without; a vouch that does not verify is ignored (the advance is unaffected).
 */
export const AdvanceBatchRequestSchema = z
  .strictObject({
    items: z.array(AdvanceBatchItemSchema).min(1).max(1000),
    vouch: z.string().min(1).max(512).optional(),
  })
  .refine((b) => (b.vouch !== undefined) === b.items.some((i) => i.grant !== undefined), {
    error: 'vouch is required with grants, and only with them',
    path: ['vouch'],
  });
export type AdvanceBatchRequest = z.infer<typeof AdvanceBatchRequestSchema>;

export const AdvanceBatchItemResultSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), resource: ResourceIdSchema, outcome: AdvanceOutcomeSchema, fence: FenceSchema }),
  z.object({ ok: z.literal(false), resource: ResourceIdSchema, code: z.literal('STALE_TOKEN'), fence: FenceSchema }),
]);
export type AdvanceBatchItemResult = z.infer<typeof AdvanceBatchItemResultSchema>;

export const AdvanceBatchResponseSchema = z.object({ results: z.array(AdvanceBatchItemResultSchema) });
export type AdvanceBatchResponse = z.infer<typeof AdvanceBatchResponseSchema>;

/**
 * POST /v1/writes (capability). Accepted only if token == fence(resource); then a new result id is
 * stored, the same result id with the same payload is a replay, and a different payload a conflict.
 */
export const WriteRequestSchema = z.strictObject({
  resource: ResourceIdSchema,
  token: TokenSchema,
  resultId: ResultIdSchema,
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  /** From the grant: `v2.<keyId>.<base64url Ed25519 signature>`. */
  capability: z.string().min(1).max(512),
  payload: JsonValueSchema,
});
export type WriteRequest = z.infer<typeof WriteRequestSchema>;

export const WriteOutcomeSchema = z.enum(['written', 'replayed']);

export const WriteResponseSchema = z.object({
  resource: ResourceIdSchema,
  resultId: ResultIdSchema,
  outcome: WriteOutcomeSchema,
  fence: FenceSchema,
});
export type WriteResponse = z.infer<typeof WriteResponseSchema>;

/** Most writes one `POST /v1/writes/batch` carries. */
export const MAX_WRITE_BATCH_ITEMS = 256;

/** One write of a batch: a write request and, optionally, the W3C `traceparent` of the writer's span. */
export const WriteBatchItemSchema = WriteRequestSchema.extend({ traceparent: TraceparentSchema.optional() });
export type WriteBatchItem = z.infer<typeof WriteBatchItemSchema>;

/**
 * POST /v1/writes/batch (a capability in each item). Every item is decided on its own, exactly as
 * `POST /v1/writes` would decide it (its own capability check, fence check and idempotency check
 * in one durable step), and answered in order; the reply follows the commit of every item. Only the
 * request as a whole (not an object, no `items`, too many, too large) fails as a whole.
 */
export const WriteBatchRequestSchema = z.strictObject({
  items: z.array(WriteBatchItemSchema).min(1).max(MAX_WRITE_BATCH_ITEMS),
});
export type WriteBatchRequest = z.infer<typeof WriteBatchRequestSchema>;

/**
 * One item's answer: what `POST /v1/writes` would have replied — its 200 body with `ok: true`, or
 * its error's code, message and retryability (and the fence, on STALE_TOKEN / FENCE_CONFLICT /
 * RESULT_CONFLICT) with `ok: false`.
 */
export const WriteBatchItemResultSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), ...WriteResponseSchema.shape }),
  z.object({
    ok: z.literal(false),
    code: ErrorCodeSchema,
    message: z.string(),
    retryable: z.boolean(),
    fence: FenceSchema.optional(),
  }),
]);
export type WriteBatchItemResult = z.infer<typeof WriteBatchItemResultSchema>;

export const WriteBatchResponseSchema = z.object({ results: z.array(WriteBatchItemResultSchema) });
export type WriteBatchResponse = z.infer<typeof WriteBatchResponseSchema>;

export const StoredResultSchema = z.object({
  resource: ResourceIdSchema,
  resultId: ResultIdSchema,
  token: TokenSchema,
  workerId: WorkerIdSchema,
  payload: JsonValueSchema,
  writtenAtMs: z.number().int().nonnegative(),
});
export type StoredResult = z.infer<typeof StoredResultSchema>;

/** Most results one page of `GET /v1/resources/:resource` holds (and the default `limit`). */
export const RESOURCE_PAGE_MAX_RESULTS = 1000;

/**
 * Cursor of a resource's results: the decimal position of a result in the resource's append order
 * (`"0"` = before the first). Results are append-only and never move, so a cursor stays valid
 * however many results land after it. Treat it as opaque: pass back what `next` gave you.
 */
export const ResultCursorSchema = z
  .string()
  .regex(new RegExp(FENCE_PATTERN), 'must be a cursor from a previous page ("next"), or "0"')
  .describe('Position in a resource\'s results: pass a page\'s `next` as `after` to continue; "0" = from the start.');

/**
 * The query of `GET /v1/resources/:resource` (strict: another parameter is 400 INVALID_MESSAGE).
 * `after`: results after this cursor (default "0": from the first); `limit`: at most this many
 * results, 0..1000 (default 1000; 0 = only the fence and whether results exist).
 */
export const ResourcePageQuerySchema = z.strictObject({
  after: ResultCursorSchema.default('0'),
  limit: z
    .string()
    .regex(/^(0|[1-9][0-9]{0,3})$/, 'must be a decimal integer 0..1000')
    .transform(Number)
    .pipe(z.number().int().min(0).max(RESOURCE_PAGE_MAX_RESULTS))
    .default(RESOURCE_PAGE_MAX_RESULTS),
});
export type ResourcePageQuery = z.infer<typeof ResourcePageQuerySchema>;

/**
 * GET /v1/resources/:resource[?after=CURSOR&limit=N]: one page of a resource's results, in the
 * order they were stored, with the fence as of this page. A page holds at most `limit` results and
 * stays within the sink's page byte budget (`READ_PAGE_MAX_BYTES`): large results make it shorter,
 * and a single result larger than the budget comes alone. A request without a query is the first
 * page (old clients see at most 1000 results and may ignore `next`).
 */
export const ResourceViewSchema = z.object({
  resource: ResourceIdSchema,
  fence: FenceSchema,
  results: z.array(StoredResultSchema),
  /** Pass as `after` for the results stored after this page's last one (the request's `after` when the page is empty). */
  next: ResultCursorSchema,
  /** True when more results existed after `next` as this page was read. */
  hasMore: z.boolean(),
});
export type ResourceView = z.infer<typeof ResourceViewSchema>;

export const DecisionKindSchema = z.enum(['advance', 'write']);
export const DecisionOutcomeSchema = z.enum([
  'advanced',
  'unchanged',
  'written',
  'replayed',
  'STALE_TOKEN',
  'FENCE_CONFLICT',
  'RESULT_CONFLICT',
]);

/** One entry of the append-only decision log: every advance and write decision, in commit order. */
export const DecisionSchema = z.object({
  seq: z.number().int().positive(),
  kind: DecisionKindSchema,
  resource: ResourceIdSchema,
  token: TokenSchema,
  /** Fence at the moment of the decision (before an advance took effect). */
  fenceBefore: FenceSchema,
  outcome: DecisionOutcomeSchema,
  resultId: ResultIdSchema.optional(),
  workerId: WorkerIdSchema.optional(),
  atMs: z.number().int().nonnegative(),
});
export type Decision = z.infer<typeof DecisionSchema>;

/** GET /v1/decisions?after=SEQ&limit=N */
export const DecisionPageSchema = z.object({
  decisions: z.array(DecisionSchema),
  /** Pass as `after` to continue; equal to the request's `after` when nothing new. */
  next: z.number().int().nonnegative(),
  /** Lowest seq still retained; entries below it were pruned by retention. */
  oldestRetained: z.number().int().nonnegative(),
});
export type DecisionPage = z.infer<typeof DecisionPageSchema>;

/**
 * POST /v1/probe (coordinator key): the coordinator's readiness check. Reaching the route proves
 * its coordinator key; the sink verifies `capability` over `claims` with its own capability keys
 * and says whether it would accept it. Nothing is stored, no fence is read or moved.
 */
export const ProbeRequestSchema = z.strictObject({
  capability: z.string().min(1).max(512),
  claims: z.strictObject({
    resource: ResourceIdSchema,
    token: TokenSchema,
    workerId: WorkerIdSchema,
    incarnation: IncarnationSchema,
  }),
});
export type ProbeRequest = z.infer<typeof ProbeRequestSchema>;

export const ProbeResponseSchema = z.object({
  /** The bearer key was accepted (or the route would have answered 401). */
  coordinatorKey: z.literal('ok'),
  /** ok: the capability verifies; unknown-key: no sink key has its key id; mismatch: the key id is known, the secret differs. */
  capability: z.enum(['ok', 'unknown-key', 'mismatch']),
  /** The key id the capability named. */
  keyId: z.string(),
});
export type ProbeResponse = z.infer<typeof ProbeResponseSchema>;

/**
 * `GET /v1/events` (read key): the sink's push channel, server-sent events. Three kinds, each the
 * `data:` of an SSE event whose `event:` field names the kind:
 *
 * - `decision` (with `id: <seq>`): one entry of the durable decision log, pushed once committed.
 *   A client resumes with `Last-Event-ID: <seq>` (or `?after=SEQ`) and gets every later entry once.
 * - `refusal` (no `id`): a write or advance refused before it reached the store (bad or missing
 *   credentials, a capability that does not verify, malformed or oversized input; one event per
 *   refused item of a write batch, with that item's claims). Ephemeral: only
 *   clients connected at that moment see it; nothing is stored or replayed.
 * - `reset` (with `id:` the seq the stream continues after): the requested position could not be
 *   honoured — entries after it were pruned by retention, or it lies beyond the end of the log.
 */
export const SinkDecisionEventSchema = DecisionSchema.extend({ type: z.literal('decision') });
export type SinkDecisionEvent = z.infer<typeof SinkDecisionEventSchema>;

/** Routes whose refusals are published on the event stream. */
export const RefusalRouteSchema = z.enum([
  '/v1/writes',
  '/v1/writes/batch',
  '/v1/fences/advance',
  '/v1/fences/advance-batch',
]);
export type RefusalRoute = z.infer<typeof RefusalRouteSchema>;

/** Refusals decided before the store (the store's own refusals are `decision` events). */
export const RefusalCodeSchema = z.enum(['UNAUTHENTICATED', 'FORBIDDEN', 'INVALID_MESSAGE', 'PAYLOAD_TOO_LARGE']);
export type RefusalCode = z.infer<typeof RefusalCodeSchema>;

export const SinkRefusalEventSchema = z.object({
  type: z.literal('refusal'),
  route: RefusalRouteSchema,
  code: RefusalCodeSchema,
  /** From the request body, only when the body parsed and the field is a valid id / token. */
  resource: ResourceIdSchema.optional(),
  token: TokenSchema.optional(),
  workerId: WorkerIdSchema.optional(),
  /** The client's address as the sink saw it. */
  remote: z.string().max(100).optional(),
  atMs: z.number().int().nonnegative(),
  /** Refusals not published since the previous refusal event (rate limit). */
  suppressed: z.number().int().positive().optional(),
});
export type SinkRefusalEvent = z.infer<typeof SinkRefusalEventSchema>;

export const SinkResetReasonSchema = z.enum([
  /** Entries after the requested seq were pruned by retention: they are lost to this client. */
  'pruned',
  /** The requested seq is beyond the end of the log (another database, or a restore). */
  'ahead',
]);

export const SinkStreamResetEventSchema = z.object({
  type: z.literal('reset'),
  reason: SinkResetReasonSchema,
  /** The seq the client asked to resume after. */
  requested: z.number().int().nonnegative(),
  /** The stream continues with the entries after this seq (also the event's `id:`). */
  resumeAfter: z.number().int().nonnegative(),
  oldestRetained: z.number().int().nonnegative(),
});
export type SinkStreamResetEvent = z.infer<typeof SinkStreamResetEventSchema>;

export const SinkEventSchema = z.discriminatedUnion('type', [
  SinkDecisionEventSchema,
  SinkRefusalEventSchema,
  SinkStreamResetEventSchema,
]);
export type SinkEvent = z.infer<typeof SinkEventSchema>;
