/**
 * The JSON values stored in etcd, as zod schemas (the task record, with its layouts, is in
 * task-record.ts). Revisions never appear inside values: a token is always read from a key's
 * create_revision. Values are versioned (`v`) so a later layout can coexist during a rolling upgrade.
 */
import {
  IncarnationSchema,
  RequestIdSchema,
  ResourceIdSchema,
  SessionIdSchema,
  TaskIdSchema,
  WorkerIdSchema,
} from '@leasehold/protocol';
import { z } from 'zod';

export {
  AttemptRecordSchema,
  OpenAttemptSchema,
  TaskRecordSchema,
  type AttemptRecord,
  type OpenAttempt,
  type TaskRecord,
} from './task-record.js';

export const TaskState = {
  PENDING: 'pending',
  DELAYED: 'delayed',
  LEASED: 'leased',
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
} as const;
export type TaskState = (typeof TaskState)[keyof typeof TaskState];

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
