/**
 * Identifier rules shared by the coordinator, the sink and workers.
 *
 * Resource, task, result and worker ids: 1-200 characters from `A-Z a-z 0-9 . _ : / @ -`, not
 * starting with `/` and not containing `//` or `..` (they become parts of etcd keys and URLs).
 */
import { z } from 'zod';

export const ID_MAX_LENGTH = 200;
/**
 * One pattern for the whole id rule (no refinement, so the generated JSON Schemas and the
 * validators compiled from them are exact): allowed characters, not starting with `/`, and no
 * `//` or `..` anywhere.
 */
export const ID_PATTERN = '^(?!.*//)(?!.*\\.\\.)[A-Za-z0-9._:@-][A-Za-z0-9._:/@-]*$';
const ID_REGEXP = new RegExp(ID_PATTERN);

function idSchema(what: string) {
  return z
    .string()
    .min(1)
    .max(ID_MAX_LENGTH)
    .regex(ID_REGEXP, `${what} may contain only A-Z a-z 0-9 . _ : / @ -, must not start with / and has no // or ..`)
    .describe(`${what}: 1-${ID_MAX_LENGTH} chars of [A-Za-z0-9._:/@-], not starting with /, no // or ..`);
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
