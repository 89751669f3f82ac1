/**
 * The JSON values stored in etcd, as zod schemas. Revisions never appear inside values: a token is
 * always read from a key's create_revision. Values are versioned (`v`) so a later layout can
 * coexist during a rolling upgrade.
 */
import {
  canonicalJson,
  IncarnationSchema,
  RequestIdSchema,
  ResourceIdSchema,
  ResultIdSchema,
  SessionIdSchema,
  TaskIdSchema,
  TokenSchema,
  WorkerIdSchema,
  type JsonValue,
} from '@leasehold/protocol';
import { z } from 'zod';

export const TaskState = {
  PENDING: 'pending',
  LEASED: 'leased',
  COMPLETED: 'completed',
  CANCELLED: 'cancelled',
} as const;
export type TaskState = (typeof TaskState)[keyof typeof TaskState];

/**
 * A payload inside a stored record: {@link decodeRecord} takes it from `JSON.parse`, so it is a JSON
 * value by construction and is not walked again (z.json() on every task event of the watch was a
 * measurable share of the coordinator's CPU per grant). Only `undefined` (key missing) is refused.
 */
const StoredJsonSchema = z.custom<JsonValue>((value) => value !== undefined, {
  error: 'payload is missing',
});

/** `tasks/<taskId>`. `leased` is never stored: it is derived from the owner key. */
export const TaskRecordSchema = z.object({
  v: z.literal(1),
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  payload: StoredJsonSchema,
  state: z.enum(['pending', 'completed', 'cancelled']),
  attempts: z.number().int().nonnegative(),
  result: z.object({ resultId: ResultIdSchema, token: TokenSchema }).optional(),
});
export type TaskRecord = z.infer<typeof TaskRecordSchema>;

/** `owners/<resource>`, attached to the session lease; create_revision = token. */
export const OwnerRecordSchema = z.object({
  v: z.literal(1),
  taskId: TaskIdSchema,
  sessionId: SessionIdSchema,
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  requestId: RequestIdSchema,
  attempt: z.number().int().positive(),
});
export type OwnerRecord = z.infer<typeof OwnerRecordSchema>;

/** `sessions/<sessionId>`, attached to the session lease. */
export const SessionRecordSchema = z.object({
  v: z.literal(1),
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  coordinatorId: z.string().min(1),
  ttlMs: z.number().int().positive(),
  /** Set by `closeSession`: the session is over, its lease about to be revoked; never adopted. */
  ending: z.literal(true).optional(),
});
export type SessionRecord = z.infer<typeof SessionRecordSchema>;

/**
 * `holdings/<sessionId>/<requestId>`, attached to the session lease; create_revision = token. One
 * per live grant: the session's owner keys, findable by prefix, and the acquire's idempotency
 * record (deleted with the owner key on release, complete, cancel and session end).
 */
export const HoldingRecordSchema = z.object({
  v: z.literal(1),
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  attempt: z.number().int().positive(),
});
export type HoldingRecord = z.infer<typeof HoldingRecordSchema>;

/** Parse a stored value; undefined when it is not valid JSON of the schema. */
export function decodeRecord<T>(schema: z.ZodType<T>, bytes: Uint8Array | string): T | undefined {
  try {
    const text = typeof bytes === 'string' ? bytes : new TextDecoder().decode(bytes);
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export function encodeRecord(value: unknown): string {
  return JSON.stringify(value);
}

/** Same task definition (resource and payload, payload compared canonically)? */
export function sameDefinition(record: TaskRecord, resource: string, payload: unknown): boolean {
  return record.resource === resource && canonicalJson(record.payload) === canonicalJson(payload);
}
