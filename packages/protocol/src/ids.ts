/**
 * Identifier rules shared by the coordinator, the sink and workers.
 *
 * Resource, task, result and worker ids: 1-200 characters from `A-Z a-z 0-9 . _ : / @ -`, not
 * starting with `/`, not containing `//` or `..`, and not `.` alone (they become parts of etcd keys
 * and URLs).
 *
 * One rule for ids and paths: every id this accepts is addressable. Clients put an id in a path as
 * one segment, `encodeURIComponent(id)` (the path builders of @leasehold/client and
 * @leasehold/sink-client), and both services route on `normalizePath`, which resolves dot
 * segments — percent-encoded ones (`%2E`) too. The only ids whose segment is a dot segment are `.`
 * and `..`, so both are refused here, at submit (and wherever else an id is read) with
 * INVALID_MESSAGE, instead of being stored and then answering 400 to `GET /v1/tasks/%2E`.
 * `ids-addressable.test.ts` (coordinator and sink) checks the claim with generated ids through
 * the real routers.
 */
import { z } from 'zod';

export const ID_MAX_LENGTH = 200;
/**
 * One pattern for the whole id rule (no refinement, so the generated JSON Schemas and the
 * validators compiled from them are exact): allowed characters, not starting with `/`, no `//` or
 * `..` anywhere, and not `.` alone (a dot segment in a path: see the header).
 */
export const ID_PATTERN = '^(?!\\.$)(?!.*//)(?!.*\\.\\.)[A-Za-z0-9._:@-][A-Za-z0-9._:/@-]*$';
const ID_REGEXP = new RegExp(ID_PATTERN);

function idSchema(what: string) {
  return z
    .string()
    .min(1)
    .max(ID_MAX_LENGTH)
    .regex(
      ID_REGEXP,
      `${what} may contain only A-Z a-z 0-9 . _ : / @ -, must not start with /, has no // or .., and is not .`,
    )
    .describe(`${what}: 1-${ID_MAX_LENGTH} chars of [A-Za-z0-9._:/@-], not starting with /, no // or .., not .`);
}

export const ResourceIdSchema = idSchema('resource id');
export const TaskIdSchema = idSchema('task id');
export const ResultIdSchema = idSchema('result id');
export const WorkerIdSchema = idSchema('worker id');
export const RequestIdSchema = idSchema('request id');

/** Worker incarnation: distinguishes restarts of the same worker id. */
export const IncarnationSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._-]+$/)
  .describe('Worker incarnation: 1-64 chars of [A-Za-z0-9._-], new for each process start.');

/**
 * Queue names (issue 25): the same path-addressable rule as the other ids, shorter (a queue name
 * is a label on metrics, an index key per pending task and a query parameter), at most
 * {@link QUEUE_NAME_MAX_LENGTH} characters.
 */
export const QUEUE_NAME_MAX_LENGTH = 64;
export const QueueNameSchema = z
  .string()
  .min(1)
  .max(QUEUE_NAME_MAX_LENGTH)
  .regex(
    ID_REGEXP,
    'queue name may contain only A-Z a-z 0-9 . _ : / @ -, must not start with /, has no // or .., and is not .',
  )
  .describe(
    `Queue name: 1-${QUEUE_NAME_MAX_LENGTH} chars of [A-Za-z0-9._:/@-], not starting with /, no // or .., not .`,
  );
export type QueueName = z.infer<typeof QueueNameSchema>;
/** The queue of a task submitted without one, and the one queue of a worker that names none. */
export const DEFAULT_QUEUE = 'default';
/** Most queues one worker session serves (its hello's `queues`). */
export const MAX_SESSION_QUEUES = 32;

export type ResourceId = z.infer<typeof ResourceIdSchema>;
export type TaskId = z.infer<typeof TaskIdSchema>;
export type ResultId = z.infer<typeof ResultIdSchema>;
export type WorkerId = z.infer<typeof WorkerIdSchema>;

/** True when `value` is a valid id of any kind (same rules for all). */
export function isValidId(value: string): boolean {
  return ResourceIdSchema.safeParse(value).success;
}

/**
 * The default result id of a task: derived from the business identity (task id), never random,
 * so a retry of the same task by any worker produces the same idempotency key.
 */
export function defaultResultId(taskId: string): string {
  return `task:${taskId}`;
}
