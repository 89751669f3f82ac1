/** HTTP error replies: the protocol's ErrorMessage with the status of its code. */
import { httpStatusOf, type ErrorCode } from '@leasehold/protocol';
import type { FastifyReply } from 'fastify';
import { errorFrame } from '../core/replies.js';

export function sendError(reply: FastifyReply, code: ErrorCode, message: string): FastifyReply {
  return reply.code(httpStatusOf(code)).send(errorFrame(code, message));
}
