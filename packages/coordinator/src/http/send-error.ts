/** HTTP error replies: the protocol's ErrorMessage with the status of its code. */
import { httpStatusOf, type ErrorCode } from '@leasehold/protocol';
import type { FastifyReply } from 'fastify';
import { errorFrame } from '../core/replies.js';

/** Seconds a client should wait before sending a refused-for-now request again (503 / 429). */
export const RETRY_AFTER_SECONDS = 1;

/** A `Retry-After` the caller set (a stream cap, a login backoff) wins over the default. */
export function sendError(reply: FastifyReply, code: ErrorCode, message: string): FastifyReply {
  const status = httpStatusOf(code);
  if ((status === 503 || status === 429) && !reply.hasHeader('retry-after')) {
    void reply.header('retry-after', String(RETRY_AFTER_SECONDS));
  }
  return reply.code(status).send(errorFrame(code, message));
}
