/**
 * The coordinator's admin HTTP API (`/v1/tasks`, `/v1/resources`): request and response bodies.
 * One schema per body, shared by the coordinator (which validates requests against them) and
 * `@leasehold/client` (which validates replies against them).
 */
import { z } from 'zod';
import { IncarnationSchema, ResourceIdSchema, ResultIdSchema, TaskIdSchema, WorkerIdSchema } from '../ids.js';
import { SessionIdSchema } from './session.js';
import { TokenSchema } from '../token.js';
import { ErrorMessageSchema, JsonValueSchema } from './common.js';

export const TaskStateSchema = z.enum(['pending', 'leased', 'completed', 'cancelled']);
export type TaskStateName = z.infer<typeof TaskStateSchema>;

/** `POST /v1/tasks` body; also one item of `POST /v1/tasks/batch`. */
export const SubmitTaskRequestSchema = z.strictObject({
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  payload: JsonValueSchema,
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

/** A task as the admin API shows it. `leased` is derived from the owner key. */
export const TaskViewSchema = z.object({
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
  payload: JsonValueSchema,
  state: TaskStateSchema,
  /** How many times the task was granted. */
  attempts: z.number().int().nonnegative(),
  result: z.object({ resultId: ResultIdSchema, token: TokenSchema }).optional(),
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
