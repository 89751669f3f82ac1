/** Turning thrown failures into `error` frames (expected refusals are built where they are decided). */
import type { ErrorMessage } from '@leasehold/protocol';
import { errorFrame } from '../core/replies.js';
import { LeaseholdError } from '../errors.js';

export function failureReply(err: unknown, inReplyTo: string | undefined): ErrorMessage {
  if (err instanceof LeaseholdError) return errorFrame(err.code, err.message, inReplyTo, { retryable: err.retryable });
  return errorFrame('INTERNAL', 'internal error', inReplyTo);
}
