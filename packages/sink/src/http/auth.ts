/** Bearer-key checks of the sink's routes (constant-time key rings from @leasehold/protocol). */
import { parseBearer, type KeyRing } from '@leasehold/protocol';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from './replies.js';

export { createKeyRing, type KeyRing } from '@leasehold/protocol';

/** The key of an `Authorization: Bearer <key>` header, if the header has that form. */
export function bearerOf(request: FastifyRequest): string | undefined {
  return parseBearer(request.headers.authorization);
}

/**
 * Check the request's bearer key against `ring`. On failure send 401 UNAUTHENTICATED (no or unknown
 * key) or 403 FORBIDDEN (a key of `weakerRing`, e.g. a read-only key on an advance) and return
 * false; the caller then returns the reply.
 */
export function authenticate(
  request: FastifyRequest,
  reply: FastifyReply,
  ring: KeyRing,
  weakerRing?: KeyRing,
): boolean {
  const key = bearerOf(request);
  if (ring(key)) return true;
  const route = request.routeOptions.url;
  if (weakerRing?.(key) === true) {
    request.log.warn({ route }, 'read-only key refused');
    void sendError(reply, 'FORBIDDEN', 'this key may only read');
    return false;
  }
  request.log.warn({ route, hasKey: key !== undefined }, 'unauthenticated request');
  void sendError(
    reply,
    'UNAUTHENTICATED',
    key === undefined ? 'missing Authorization: Bearer <key>' : 'unknown bearer key',
  );
  return false;
}
