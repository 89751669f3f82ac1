/**
 * The task record of key layout v2 (`tasks/<taskId>`) and its decoding, pure.
 *
 * Layout v2 keeps the record small and bounded — no payload, no history — so that no read of the
 * `tasks/` family (the index snapshot, lists, purge, the console) ever carries a payload:
 *
 * - `tasks/<t>`: this record: state, attempts, the open attempt, retry policy, failures, the last
 *   ended attempt and error (clipped to {@link ERROR_TEXT_BYTES}), times, result, `payloadBytes`
 *   and `payloadDigest` (so a repeated submit is judged without reading the payload);
 * - `inputs/<t>`: the payload's JSON, written once by the submit txn, read by grants (a `get` in the
 *   grant txn itself) and task views, deleted with the task;
 * - `history/<t>#<n>`: the n-th ended attempt (n = {@link TaskRecord.endedAttempts} after it),
 *   written by the txn that ends it, which also deletes entry n − {@link MAX_TASK_HISTORY}.
 *
 * Every stored record is at most {@link MAX_TASK_RECORD_BYTES}: ids are ASCII and bounded, error
 * texts are clipped by their encoded size, and a submit whose record would leave less than
 * {@link RECORD_GROWTH_BYTES} of room (a retry policy with many long error names) is refused.
 *
 * Layout v1 (until 0.2) kept `payload` and `history` inside `tasks/<t>`. {@link decodeTask} reads
 * both: a v1 record comes back as its v2 shape plus the `legacy` parts, which the next write of
 * the task moves to their own keys (the layout migration, `etcd/transactions/task-txns.ts`).
 */
import {
  AttemptOutcomeSchema,
  canonicalJson,
  compileValidator,
  DEFAULT_QUEUE,
  MAX_TASK_HISTORY,
  PrioritySchema,
  QueueNameSchema,
  ResourceIdSchema,
  ResultIdSchema,
  RetryPolicySchema,
  SessionIdSchema,
  TaskEventKindSchema,
  TaskIdSchema,
  TaskRetentionSchema,
  TokenSchema,
  TraceparentSchema,
  WorkerIdSchema,
  type JsonValue,
} from '@leasehold/protocol';
import { z } from 'zod';

/** Upper bound of one encoded task record (layout v2), in bytes. */
export const MAX_TASK_RECORD_BYTES = 16 * 1024;
/** What a record may grow by after its submit (open attempt, last attempt and error, result, times). */
export const RECORD_GROWTH_BYTES = 5 * 1024;
/** Encoded size bound of an error's name and of its message, in a record and a history entry. */
export const ERROR_TEXT_BYTES = 1024;
/** Upper bound of one encoded history entry. */
export const MAX_HISTORY_ENTRY_BYTES = 4 * 1024;

const ErrorSchema = z.object({ name: z.string(), message: z.string() });
export type RecordedError = z.infer<typeof ErrorSchema>;

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

const StoredStateSchema = z.enum(['pending', 'completed', 'failed', 'cancelled']);

/** Fields layouts v1 and v2 share. */
const CommonShape = {
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  /**
   * The task's queue (issue 25). Absent: `default` — records written before queues, and read as
   * such by every reader ({@link queueOf}); no rewrite needed (the migration is the reading rule).
   */
  queue: QueueNameSchema.optional(),
  state: StoredStateSchema,
  /** Grants in the current attempt budget (a release or an abandoned grant gives one back). */
  attempts: z.number().int().nonnegative(),
  result: z.object({ resultId: ResultIdSchema, token: TokenSchema, noResult: z.literal(true).optional() }).optional(),
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
};

/** `tasks/<taskId>` in layout v2. `leased` and `delayed` are never stored (owner key, `notBeforeMs`). */
export const TaskRecordSchema = z.object({
  v: z.literal(2),
  ...CommonShape,
  /** Bytes of the payload's JSON in `inputs/<t>`. */
  payloadBytes: z.number().int().nonnegative(),
  /** sha256 (base64url) of the payload's canonical JSON: a repeated submit is judged by it. */
  payloadDigest: z.string().max(64),
  /** The attempt that ended last (also `history/<t>#<endedAttempts>`). */
  last: AttemptRecordSchema.optional(),
  /** Attempts ended so far, ever (the history's sequence number; never reset). */
  endedAttempts: z.number().int().nonnegative().optional(),
  /** The task's own retention rules (submit's `retention`). */
  retention: TaskRetentionSchema.optional(),
});
export type TaskRecord = z.infer<typeof TaskRecordSchema>;

/**
 * A payload inside a v1 record: taken from `JSON.parse`, so a JSON value by construction, not walked
 * again. Only `undefined` (key missing) is refused.
 */
const StoredJsonSchema = z.custom<JsonValue>((value) => value !== undefined, { error: 'payload is missing' });

/** `tasks/<taskId>` in layout v1: the payload and the last attempts inside the record. */
export const LegacyTaskRecordSchema = z.object({
  v: z.literal(1),
  ...CommonShape,
  payload: StoredJsonSchema,
  history: z.array(AttemptRecordSchema).optional(),
});
export type LegacyTaskRecord = z.infer<typeof LegacyTaskRecordSchema>;

/** The parts of a v1 record that layout v2 keeps under keys of their own. */
export interface LegacyParts {
  readonly payload: JsonValue;
  /** Its JSON as `inputs/<t>` will hold it. */
  readonly payloadJson: string;
  /** Oldest first; entry i becomes `history/<t>#<i + 1>`. */
  readonly history: readonly AttemptRecord[];
}

export interface DecodedTask {
  readonly record: TaskRecord;
  /** Set for a v1 record: what its next write must move to `inputs/` and `history/`. */
  readonly legacy?: LegacyParts;
}

/** UTF-8 bytes of `text`. */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      bytes += 4;
      i += 1;
    } else bytes += 3;
  }
  return bytes;
}

/** The longest prefix of `text` whose JSON string (quotes and escapes included) is at most `maxBytes`. */
export function clipText(text: string, maxBytes: number): string {
  if (utf8Bytes(JSON.stringify(text)) <= maxBytes) return text;
  let lo = 0;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (utf8Bytes(JSON.stringify(`${text.slice(0, mid)}…`)) <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  // Never cut a surrogate pair in two.
  const end = lo > 0 && /[\ud800-\udbff]/.test(text.charAt(lo - 1)) ? lo - 1 : lo;
  return `${text.slice(0, end)}…`;
}

/** An error as stored: name and message clipped to {@link ERROR_TEXT_BYTES} each. */
export function clipError(error: { readonly name: string; readonly message: string }): RecordedError {
  return { name: clipText(error.name, ERROR_TEXT_BYTES), message: clipText(error.message, ERROR_TEXT_BYTES) };
}

function clipAttempt(a: AttemptRecord): AttemptRecord {
  return a.error === undefined ? a : { ...a, error: clipError(a.error) };
}

const isTaskRecord = compileValidator(TaskRecordSchema);

/** sha256 (base64url) of a canonical JSON text: given by the etcd layer (pure code cannot hash). */
export type DigestFn = (canonical: string) => string;

/**
 * Parse a stored `tasks/<t>` value of either layout; undefined when it is neither. `digest` makes a
 * v1 record's `payloadDigest` (v2 records carry theirs).
 */
export function decodeTask(bytes: Uint8Array | string, digest: DigestFn): DecodedTask | undefined {
  let json: unknown;
  try {
    json = JSON.parse(typeof bytes === 'string' ? bytes : new TextDecoder().decode(bytes));
  } catch {
    return undefined;
  }
  // The snapshot decodes every record at start (a million of them): a validator compiled from the
  // schema takes the common case (exactly the schema's rules, unknown keys refused), zod the rest.
  if (isTaskRecord(json)) return { record: json };
  const v2 = TaskRecordSchema.safeParse(json);
  if (v2.success) return { record: v2.data };
  const v1 = LegacyTaskRecordSchema.safeParse(json);
  return v1.success ? fromLegacy(v1.data, digest) : undefined;
}

/** A v1 record as its v2 shape plus the parts that move out. */
export function fromLegacy(old: LegacyTaskRecord, digest: DigestFn): DecodedTask {
  const { v: _v, payload, history: oldHistory, ...common } = old;
  const history = (oldHistory ?? []).slice(-MAX_TASK_HISTORY).map(clipAttempt);
  const payloadJson = JSON.stringify(payload);
  const last = history.at(-1);
  const record: TaskRecord = {
    v: 2,
    ...common,
    ...(common.lastError === undefined ? {} : { lastError: clipError(common.lastError) }),
    payloadBytes: utf8Bytes(payloadJson),
    payloadDigest: digest(canonicalJson(payload)),
    ...(last === undefined ? {} : { last, endedAttempts: history.length }),
  };
  return { record, legacy: { payload, payloadJson, history } };
}

export function encodeTask(record: TaskRecord): string {
  return JSON.stringify(record);
}

/** The queue of a stored record: records without one (written before queues) are `default`'s. */
export function queueOf(record: { readonly queue?: string | undefined }): string {
  return record.queue ?? DEFAULT_QUEUE;
}

/** Same task definition: same resource, same queue and same payload (compared by digest)? */
export function sameDefinition(stored: DecodedTask, resource: string, queue: string, payloadDigest: string): boolean {
  return (
    stored.record.resource === resource &&
    queueOf(stored.record) === queue &&
    stored.record.payloadDigest === payloadDigest
  );
}
