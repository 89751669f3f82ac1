/**
 * The JSON values stored in etcd, as zod schemas. Revisions never appear inside values: a token is
 * always read from a key's create_revision. Values are versioned (`v`) so a later layout can
 * coexist during a rolling upgrade.
 */
import {
  AttemptOutcomeSchema,
  canonicalJson,
  IncarnationSchema,
  RequestIdSchema,
  ResourceIdSchema,
  ResultIdSchema,
  SessionIdSchema,
  TaskIdSchema,
  TokenSchema,
  TraceparentSchema,
  WorkerIdSchema,
  PrioritySchema,
  RetryPolicySchema,
  TaskEventKindSchema,
  type JsonValue,
} from '@leasehold/protocol';
import { z } from 'zod';

export const TaskState = {
  PENDING: 'pending',
  DELAYED: 'delayed',
  LEASED: 'leased',
  COMPLETED: 'completed',
  FAILED: 'failed',
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

const ErrorSchema = z.object({ name: z.string(), message: z.string() });

/**
 * An ended attempt. Its token is the grant's (the task key's mod_revision the grant wrote). The
 * session that held it is kept (absent on records of older coordinators) so that a repeated
 * `task.complete` / `task.fail` is answered as a replay only to that very session.
 */
export const AttemptRecordSchema = z.object({
  attempt: z.number().int().nonnegative(),
  workerId: WorkerIdSchema,
  sessionId: SessionIdSchema.optional(),
  token: TokenSchema,
  outcome: AttemptOutcomeSchema,
  error: ErrorSchema.optional(),
  startedAtMs: z.number().int().nonnegative(),
  endedAtMs: z.number().int().nonnegative(),
});
export type AttemptRecord = z.infer<typeof AttemptRecordSchema>;

/**
 * The attempt running now, written by the grant txn (which also creates the owner key: the token
 * of this attempt is therefore the task key's mod_revision while `open` is set). Any record written
 * after it — complete, fail, release, cancel, or the settlement of a lost lease — clears it.
 */
export const OpenAttemptSchema = z.object({
  attempt: z.number().int().positive(),
  workerId: WorkerIdSchema,
  sessionId: SessionIdSchema,
  startedAtMs: z.number().int().nonnegative(),
});
export type OpenAttempt = z.infer<typeof OpenAttemptSchema>;

/**
 * `tasks/<taskId>`. `leased` and `delayed` are never stored: derived from the owner key and
 * `notBeforeMs`. Fields after `attempts` came with the task lifecycle (retry policy, history); a
 * record without them (written by an older coordinator) reads with their defaults.
 */
export const TaskRecordSchema = z.object({
  v: z.literal(1),
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  payload: StoredJsonSchema,
  state: z.enum(['pending', 'completed', 'failed', 'cancelled']),
  /** Grants in the current attempt budget (a release or an abandoned grant gives one back). */
  attempts: z.number().int().nonnegative(),
  result: z.object({ resultId: ResultIdSchema, token: TokenSchema }).optional(),
  priority: PrioritySchema.optional(),
  /** The policy resolved at submit; absent on old records: the reading coordinator's defaults. */
  retry: RetryPolicySchema.optional(),
  /** Not grantable before (epoch ms, wall clock). */
  notBeforeMs: z.number().int().nonnegative().optional(),
  open: OpenAttemptSchema.optional(),
  /** Consecutive failed attempts (drives the backoff); reset by completion and retry. */
  failures: z.number().int().nonnegative().optional(),
  /** Consecutive abandoned grants (sink unreachable): their own backoff, no attempt spent. */
  deferrals: z.number().int().nonnegative().optional(),
  history: z.array(AttemptRecordSchema).optional(),
  lastError: ErrorSchema.optional(),
  lastEvent: TaskEventKindSchema.optional(),
  /** Wall time of the last change. */
  atMs: z.number().int().nonnegative().optional(),
  createdAtMs: z.number().int().nonnegative().optional(),
  endedAtMs: z.number().int().nonnegative().optional(),
  /**
   * W3C trace context of the submit span (tracing on): each grant's span is its child, on any
   * coordinator. Absent when tracing was off at submit, and on records of older coordinators.
   */
  traceparent: TraceparentSchema.optional(),
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

/**
 * `console/revoked/<loginId>`, on a lease of its own that ends when the cookie would have expired:
 * a console login ended by logout, refused by every coordinator from then on.
 */
export const ConsoleRevokedRecordSchema = z.object({
  v: z.literal(1),
  /** When the cookie expires anyway (wall clock, epoch ms): the record is moot after that. */
  expiresAtMs: z.number().int().positive(),
});
export type ConsoleRevokedRecord = z.infer<typeof ConsoleRevokedRecordSchema>;

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
