/**
 * HTTP bodies of the sink (the fenced write target). Paths are under `/v1`; see docs/protocol.md.
 * Every error response is an {@link ErrorMessageSchema} body with the status of its code.
 */
import { z } from 'zod';
import { IncarnationSchema, ResourceIdSchema, ResultIdSchema, WorkerIdSchema } from '../ids.js';
import { FenceSchema, TokenSchema } from '../token.js';
import { JsonValueSchema } from './common.js';

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

/** POST /v1/fences/advance-batch (coordinator key): many advances in one durable commit. */
export const AdvanceBatchRequestSchema = z.strictObject({
  items: z.array(AdvanceRequestSchema).min(1).max(1000),
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
  /** From the grant: `v1.<keyId>.<base64url HMAC-SHA256>`. */
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

export const StoredResultSchema = z.object({
  resource: ResourceIdSchema,
  resultId: ResultIdSchema,
  token: TokenSchema,
  workerId: WorkerIdSchema,
  payload: JsonValueSchema,
  writtenAtMs: z.number().int().nonnegative(),
});
export type StoredResult = z.infer<typeof StoredResultSchema>;

/** GET /v1/resources/:resource */
export const ResourceViewSchema = z.object({
  resource: ResourceIdSchema,
  fence: FenceSchema,
  results: z.array(StoredResultSchema),
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
