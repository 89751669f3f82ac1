import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from '../error-codes.js';

/** Correlation id a sender puts on a request; replies echo it as `inReplyTo`. */
export const MessageIdSchema = z.string().min(1).max(64).describe('Sender-chosen message id, echoed as inReplyTo.');

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
