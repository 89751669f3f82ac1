/**
 * The coordinator's admin HTTP API (`/v1/tasks`, `/v1/resources`): request and response bodies.
 * One schema per body, shared by the coordinator (which validates requests against them) and
 * `@leasehold/client` (which validates replies against them).
 */
import { z } from 'zod';
import {
  IncarnationSchema,
  QueueNameSchema,
  ResourceIdSchema,
  ResultIdSchema,
  TaskIdSchema,
  WorkerIdSchema,
} from '../ids.js';
import { SessionIdSchema } from './session.js';
import { TokenSchema } from '../token.js';
import { RetryPolicyInputSchema, RetryPolicySchema } from '../model/retry-policy.js';
import { ErrorMessageSchema, JsonValueSchema, TaskOnResource } from './common.js';

/**
 * States as the admin API shows them. Stored: pending, completed, failed, cancelled; derived:
 * `leased` (pending with an owner key) and `delayed` (pending, not grantable before `notBeforeMs`).
 */
export const TaskStateSchema = z.enum(['pending', 'delayed', 'leased', 'completed', 'failed', 'cancelled']);
export type TaskStateName = z.infer<typeof TaskStateSchema>;

/**
 * How views rank a resource's tasks by state (lower first): the live one, then what waits, then
 * what ended — the CLI's `status` and the console's resource rows both show the first.
 */
export const TASK_STATE_RANK: Readonly<Record<TaskStateName, number>> = {
  leased: 0,
  pending: 1,
  delayed: 2,
  failed: 3,
  completed: 4,
  cancelled: 5,
};

/** A state's rank in {@link TASK_STATE_RANK}; anything that is not a task state ranks after all. */
export function taskStateRank(state: string | undefined): number {
  return state !== undefined && Object.hasOwn(TASK_STATE_RANK, state) ? TASK_STATE_RANK[state as TaskStateName] : 9;
}

/** Terminal states: nothing happens to such a task any more, except retry (failed) and purge. */
export const TerminalTaskStateSchema = z.enum(['completed', 'failed', 'cancelled']);
export type TerminalTaskState = z.infer<typeof TerminalTaskStateSchema>;

/** Grant order among pending tasks of free resources: higher first, then oldest first. */
export const MAX_PRIORITY = 9;
export const PrioritySchema = z.number().int().min(0).max(MAX_PRIORITY);

/** Longest a submit may delay a task (`delayMs`, or `runAt` from now). */
export const MAX_DELAY_MS = 366 * 24 * 3_600_000;

/**
 * Largest task payload a coordinator accepts by default: the bytes of its JSON (UTF-8), as stored
 * in etcd. A bigger submit is refused with 413 `PAYLOAD_TOO_LARGE` and nothing is stored. Pass
 * large inputs by reference (a URL or an object-store key in the payload).
 */
export const DEFAULT_MAX_TASK_PAYLOAD_BYTES = 256 * 1024;
/** The highest `MAX_TASK_PAYLOAD_BYTES` may be set: one submit txn stays below etcd's 1.5 MiB request limit. */
export const MAX_TASK_PAYLOAD_BYTES_LIMIT = 1024 * 1024;

/** Longest retention a submit may ask for (10 years, in ms). */
export const MAX_RETENTION_MS = 10 * 366 * 24 * 3_600_000;

/**
 * How long an ended task stays in etcd after it ended, in ms (0: removed by the next sweep), or
 * `null`: never by age or count (only by purge, or by the byte cap that protects etcd's quota).
 */
export const KeepForSchema = z.union([z.number().int().nonnegative().max(MAX_RETENTION_MS), z.null()]);
export type KeepFor = z.infer<typeof KeepForSchema>;

/**
 * A task's own retention (like BullMQ's removeOnComplete / removeOnFail), per end state; a state
 * left out follows the installation's `RETENTION_*` settings. A task with its own rule for the
 * state it ended in is not counted against that state's count limit.
 */
export const TaskRetentionSchema = z.strictObject({
  completed: KeepForSchema.optional(),
  failed: KeepForSchema.optional(),
  cancelled: KeepForSchema.optional(),
});
export type TaskRetention = z.infer<typeof TaskRetentionSchema>;

/**
 * `POST /v1/tasks` body; also one item of `POST /v1/tasks/batch`. Idempotent by `taskId`: the same
 * id with the same resource, queue and payload is the same task (the scheduling options of a repeat
 * are ignored: the first submit's apply); with another resource, queue or payload it is a conflict.
 */
export const SubmitTaskRequestSchema = z.strictObject({
  ...TaskOnResource,
  payload: JsonValueSchema,
  /** The queue it waits in: only workers serving it are granted it. Default `default`. */
  queue: QueueNameSchema.optional(),
  /** 0..9, default 0: among grantable tasks, higher priorities are granted first. */
  priority: PrioritySchema.optional(),
  /** Not granted before this time (ISO 8601 with offset). Not with `delayMs`. */
  runAt: z.iso.datetime({ offset: true }).optional(),
  /** Not granted before this many ms from the submit. Not with `runAt`. */
  delayMs: z.number().int().nonnegative().max(MAX_DELAY_MS).optional(),
  /** Overrides of the installation's retry policy. */
  retry: RetryPolicyInputSchema.optional(),
  /** How long the task stays in etcd once ended (default: the installation's RETENTION_* settings). */
  retention: TaskRetentionSchema.optional(),
});
export type SubmitTaskRequest = z.infer<typeof SubmitTaskRequestSchema>;

/** Most tasks in one `POST /v1/tasks/batch`. */
export const MAX_BATCH_SUBMIT = 1_000;

export const SubmitTaskBatchRequestSchema = z.strictObject({
  tasks: z.array(SubmitTaskRequestSchema).min(1).max(MAX_BATCH_SUBMIT),
});
export type SubmitTaskBatchRequest = z.infer<typeof SubmitTaskBatchRequestSchema>;

export const OwnerViewSchema = z.object({
  sessionId: SessionIdSchema,
  workerId: WorkerIdSchema,
  incarnation: IncarnationSchema,
  token: TokenSchema,
  attempt: z.number().int().positive(),
});
export type OwnerView = z.infer<typeof OwnerViewSchema>;

/** How an attempt ended. */
export const AttemptOutcomeSchema = z.enum([
  'completed',
  /** The handler failed (task.fail). */
  'failed',
  /** The lease ended without a result (session expired, worker gone, coordinator lost it). */
  'expired',
  /** The worker gave the lease back (does not count against the attempts). */
  'released',
  /** The grant never reached the worker: the sink's fence advance failed (does not count). */
  'abandoned',
  'cancelled',
]);
export type AttemptOutcome = z.infer<typeof AttemptOutcomeSchema>;

export const TaskErrorSchema = z.object({ name: z.string(), message: z.string() });
export type TaskError = z.infer<typeof TaskErrorSchema>;

/** One ended attempt (the task keeps the last {@link MAX_TASK_HISTORY}). */
export const AttemptViewSchema = z.object({
  attempt: z.number().int().nonnegative(),
  workerId: WorkerIdSchema,
  token: TokenSchema,
  outcome: AttemptOutcomeSchema,
  error: TaskErrorSchema.optional(),
  startedAtMs: z.number().int().nonnegative(),
  endedAtMs: z.number().int().nonnegative(),
});
export type AttemptView = z.infer<typeof AttemptViewSchema>;

export const MAX_TASK_HISTORY = 10;

/** What last happened to a task (the change that wrote its current record). */
export const TaskEventKindSchema = z.enum([
  'submitted',
  'granted',
  'completed',
  /** An attempt failed and the task waits for its backoff. */
  'retrying',
  /** An attempt's lease ended without a result; the task waits for its backoff. */
  'expired',
  'released',
  'abandoned',
  /** Terminal failure: attempts used up, or a non-retryable error. */
  'failed',
  'cancelled',
  /** A failed task was made pending again with a fresh attempt budget. */
  'retried',
]);
export type TaskEventKind = z.infer<typeof TaskEventKindSchema>;

/**
 * Where a completed task's result is: the sink's result `resultId`, written under `token`.
 * `noResult`: the handler wrote nothing to the sink (a side effect only, or its own fenced
 * transaction); `resultId` is then the task's default key and the sink holds nothing under it.
 */
export const ResultRefSchema = z.object({
  resultId: ResultIdSchema,
  token: TokenSchema,
  noResult: z.literal(true).optional(),
});
export type ResultRef = z.infer<typeof ResultRefSchema>;

/**
 * A task as the admin API shows it. `leased` and `delayed` are derived. `payload` and `history`
 * are read on demand: present in `GET /v1/tasks/:taskId` only; lists, submit, cancel and retry
 * replies leave them out (their size is bounded by the record, never by the payload) and carry
 * `payloadBytes` and the `lastAttempt` instead.
 */
export const TaskViewSchema = z.object({
  ...TaskOnResource,
  /** Its queue (`default` for tasks submitted without one). */
  queue: QueueNameSchema,
  /** `GET /v1/tasks/:taskId` only. */
  payload: JsonValueSchema.optional(),
  /** Size of the stored payload (its JSON, UTF-8 bytes). */
  payloadBytes: z.number().int().nonnegative(),
  state: TaskStateSchema,
  /** Grants in the current attempt budget (a retry starts a fresh one). */
  attempts: z.number().int().nonnegative(),
  priority: PrioritySchema,
  retry: RetryPolicySchema,
  /** Not grantable before this time (epoch ms), when set. */
  notBeforeMs: z.number().int().nonnegative().optional(),
  lastEvent: TaskEventKindSchema,
  lastError: TaskErrorSchema.optional(),
  /** The attempts that ended, oldest first (the last {@link MAX_TASK_HISTORY}): `GET /v1/tasks/:taskId` only. */
  history: z.array(AttemptViewSchema).optional(),
  /** The attempt that ended last, if any (in every view). */
  lastAttempt: AttemptViewSchema.optional(),
  /** The task's own retention rules, when it was submitted with some. */
  retention: TaskRetentionSchema.optional(),
  createdAtMs: z.number().int().nonnegative().optional(),
  /** When it reached its terminal state (purge's `olderThanMs` counts from here). */
  endedAtMs: z.number().int().nonnegative().optional(),
  result: ResultRefSchema.optional(),
  owner: OwnerViewSchema.optional(),
});
export type TaskView = z.infer<typeof TaskViewSchema>;

/** `GET /v1/tasks?state=&limit=&after=`: a page in id order; `next` continues it. */
export const TaskPageSchema = z.object({
  tasks: z.array(TaskViewSchema),
  next: TaskIdSchema.nullable(),
});
export type TaskPage = z.infer<typeof TaskPageSchema>;

/** `POST /v1/tasks/batch` reply: one item per submitted task, in order. */
export const SubmitTaskBatchResponseSchema = z.object({
  results: z.array(
    z.object({
      taskId: TaskIdSchema,
      status: z.union([z.literal(200), z.literal(201), z.number().int()]),
      task: TaskViewSchema.optional(),
      error: ErrorMessageSchema.optional(),
    }),
  ),
});
export type SubmitTaskBatchResponse = z.infer<typeof SubmitTaskBatchResponseSchema>;

/** `GET /v1/resources/:resource`: the current owner of a resource, if any. */
export const ResourceOwnerViewSchema = z.object({
  resource: ResourceIdSchema,
  owner: OwnerViewSchema.extend({ taskId: TaskIdSchema, coordinatorId: z.string().nullable() }).nullable(),
  token: TokenSchema.nullable(),
  /** Time left before the holder's session deadline, known only by the coordinator serving it. */
  remainingMs: z.number().int().nullable(),
});
export type ResourceOwnerView = z.infer<typeof ResourceOwnerViewSchema>;

/** `POST /v1/tasks/purge`: delete terminal tasks of one state that ended before `olderThanMs` ago. */
export const PurgeTasksRequestSchema = z.strictObject({
  state: TerminalTaskStateSchema,
  olderThanMs: z
    .number()
    .int()
    .nonnegative()
    .max(10 * 366 * 24 * 3_600_000),
  /** At most this many per call (default 1000); `more` says whether to call again. */
  limit: z.number().int().min(1).max(10_000).optional(),
});
export type PurgeTasksRequest = z.infer<typeof PurgeTasksRequestSchema>;

export const PurgeTasksResponseSchema = z.object({
  purged: z.number().int().nonnegative(),
  more: z.boolean(),
});
export type PurgeTasksResponse = z.infer<typeof PurgeTasksResponseSchema>;

/**
 * One task change on the push channel (`GET /v1/events`, server-sent events): `id:` is the etcd
 * revision of the change, so a client resumes after a reconnect with `Last-Event-ID` and misses
 * nothing (unless the revision was compacted: then a `reset` event says so).
 */
export const TaskEventSchema = z.object({
  type: z.literal('task'),
  /** etcd revision of the change (decimal). */
  revision: TokenSchema,
  event: TaskEventKindSchema,
  ...TaskOnResource,
  /** The task's queue. Absent from coordinators before queues: read it as `default`. */
  queue: QueueNameSchema.optional(),
  /** The state after the change (leased on a grant; delayed while waiting for a backoff). */
  state: TaskStateSchema,
  attempts: z.number().int().nonnegative(),
  maxAttempts: z.number().int().positive(),
  /** The grant's token (granted), or the ended attempt's (completed, retrying, expired, failed…). */
  token: TokenSchema.optional(),
  workerId: WorkerIdSchema.optional(),
  error: TaskErrorSchema.optional(),
  notBeforeMs: z.number().int().nonnegative().optional(),
  result: ResultRefSchema.optional(),
  /** Wall-clock time of the change as recorded by the coordinator that made it (epoch ms). */
  atMs: z.number().int().nonnegative(),
});
export type TaskEvent = z.infer<typeof TaskEventSchema>;

/** The stream could not resume where asked (compacted): events before `revision` were missed. */
export const StreamResetEventSchema = z.object({
  type: z.literal('reset'),
  revision: TokenSchema,
  reason: z.string(),
});
export type StreamResetEvent = z.infer<typeof StreamResetEventSchema>;

export const CoordinatorEventSchema = z.discriminatedUnion('type', [TaskEventSchema, StreamResetEventSchema]);
export type CoordinatorEvent = z.infer<typeof CoordinatorEventSchema>;
