/**
 * Error bodies of the sink's HTTP API. Every non-2xx response, including fastify's own errors
 * (bad JSON, body too large, unknown route, bad URL), is an `ErrorMessage`
 * `{type:'error', code, message, retryable, fence?}` with the status of its code.
 */
import {
  ERROR_CODE_INFO,
  LeaseholdError,
  formatToken,
  httpStatusOf,
  type ErrorCode,
  type ErrorMessage,
} from '@leasehold/protocol';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Socket } from 'node:net';
import type { z } from 'zod';

export function errorBody(code: ErrorCode, message: string, fence?: bigint): ErrorMessage {
  const body: ErrorMessage = { type: 'error', code, message, retryable: ERROR_CODE_INFO[code].retryable };
  if (fence !== undefined) body.fence = formatToken(fence);
  return body;
}

export function sendError(reply: FastifyReply, code: ErrorCode, message: string, fence?: bigint): FastifyReply {
  if (code === 'UNAUTHENTICATED') void reply.header('www-authenticate', 'Bearer');
  const status = httpStatusOf(code);
  // Draining, store unavailable: come back in a second (a peer, or this sink once restarted).
  if (status === 503 || status === 429) void reply.header('retry-after', '1');
  return reply.code(status).send(errorBody(code, message, fence));
}

/** A short, value-free summary of zod issues (never echoes payloads or secrets). */
export function describeIssues(error: z.ZodError): string {
  const parts = error.issues.slice(0, 5).map((issue) => {
    const path = issue.path.length > 0 ? issue.path.map(String).join('.') : '(body)';
    return `${path}: ${issue.message}`;
  });
  if (error.issues.length > 5) parts.push(`and ${error.issues.length - 5} more`);
  return parts.join('; ');
}

interface ClassifiedError {
  readonly code: ErrorCode;
  readonly message: string;
}

/** Map any error reaching fastify's error handler to one of our codes. */
export function classifyError(err: unknown): ClassifiedError {
  if (err instanceof LeaseholdError) return { code: err.code, message: err.message };
  const fe = err as Partial<FastifyError>;
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  const fastifyCode = typeof fe.code === 'string' ? fe.code : '';
  if (status === 413 || fastifyCode === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return { code: 'PAYLOAD_TOO_LARGE', message: 'request body exceeds the configured limit' };
  }
  if (fastifyCode === 'FST_ERR_CTP_INVALID_MEDIA_TYPE' || status === 415) {
    return { code: 'INVALID_MESSAGE', message: 'content-type must be application/json' };
  }
  if (fastifyCode === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return { code: 'INVALID_MESSAGE', message: 'empty JSON body' };
  }
  if (fastifyCode === 'FST_ERR_CTP_INVALID_JSON_BODY' || fe.name === 'SyntaxError') {
    return { code: 'INVALID_MESSAGE', message: 'malformed JSON body' };
  }
  if (fastifyCode === 'FST_ERR_BAD_URL' || fastifyCode === 'FST_ERR_MAX_PARAM_LENGTH') {
    return { code: 'INVALID_MESSAGE', message: 'malformed or over-long URL' };
  }
  if (status === 404) return { code: 'NOT_FOUND', message: 'not found' };
  if (status >= 400 && status < 500) {
    return { code: 'INVALID_MESSAGE', message: `bad request (${fastifyCode || status})` };
  }
  return { code: 'INTERNAL', message: 'internal error' };
}

/** Replace fastify's default error, not-found and framework error bodies with ours. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const { code, message } = classifyError(err);
    if (code === 'INTERNAL') request.log.error({ err }, 'request failed');
    else request.log.debug({ code }, 'request refused');
    return sendError(reply, code, message);
  });
  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) =>
    sendError(reply, 'NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`),
  );
}

/**
 * For fastify's `clientErrorHandler`: malformed HTTP (bad headers, bad content-length, header
 * overflow) never reaches a route; answer with our body and close the connection.
 */
export function onClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? ['431 Request Header Fields Too Large', 'request headers too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? ['408 Request Timeout', 'request timed out']
        : ['400 Bad Request', 'malformed HTTP request'];
  const body = JSON.stringify(errorBody('INVALID_MESSAGE', message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

/** For fastify's `frameworkErrors` option (bad URL encoding, over-long params). */
export function onFrameworkError(err: FastifyError, _request: FastifyRequest, reply: FastifyReply): void {
  const { code, message } = classifyError(err);
  void sendError(reply, code, message);
}
