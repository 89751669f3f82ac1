import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../error-codes.js';
import { ResourceIdSchema, TaskIdSchema } from '../ids.js';

/**
 * W3C trace context (`traceparent`, version 00): optional on the frames that continue a task's
 * trace across processes. Peers without tracing send none and ignore it.
 */
export const TraceparentSchema = z
  .string()
  .regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/)
  .describe('W3C trace context of the span this message continues (https://www.w3.org/TR/trace-context/).');

/** Correlation id a sender puts on a request; replies echo it as `inReplyTo`. */
export const MessageIdSchema = z.string().min(1).max(64).describe('Sender-chosen message id, echoed as inReplyTo.');

/**
 * A task and the resource it is for (the resource whose fence its grants advance): the two fields
 * every message about one task starts with (submit, view, event, grant, completion replies).
 */
export const TaskOnResource = {
  taskId: TaskIdSchema,
  resource: ResourceIdSchema,
};

export const ErrorCodeSchema = z.enum(ERROR_CODES as [ErrorCode, ...ErrorCode[]]);

/** Any JSON value (task payloads, results). */
export const JsonValueSchema = z.json();

/** `error` frame / HTTP error body. */
export const ErrorMessageSchema = z
  .object({
    type: z.literal('error'),
    code: ErrorCodeSchema,
    message: z.string(),
    retryable: z.boolean(),
    inReplyTo: MessageIdSchema.optional(),
    /** Current fence, on STALE_TOKEN / FENCE_CONFLICT. */
    fence: z.string().optional(),
  })
  .describe('An error reply or push. `code` is stable; `retryable` says whether the same request may succeed later.');
export type ErrorMessage = z.infer<typeof ErrorMessageSchema>;
