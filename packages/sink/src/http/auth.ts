/**
 * Bearer-key checks. Keys are compared in constant time: both sides are hashed to SHA-256 (equal
 * lengths) and compared with `timingSafeEqual` against EVERY configured key, so neither the match
 * position nor the key lengths leak through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { sendError } from './replies.js';

export type KeyRing = (presented: string | undefined) => boolean;

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

/** A matcher for `Authorization: Bearer <key>` against `keys`. */
export function createKeyRing(keys: readonly string[]): KeyRing {
  const digests = keys.map(digest);
  return (presented) => {
    if (presented === undefined) return false;
    const given = digest(presented);
    let match = false;
    for (const d of digests) match = timingSafeEqual(given, d) || match;
    return match;
  };
}

/** The key of an `Authorization: Bearer <key>` header, if the header has that form. */
export function bearerOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (typeof header !== 'string') return undefined;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  return match?.[1];
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
