/** Bearer-key checks for the admin HTTP API and the worker WebSocket upgrade. */
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** True when `header` is `Bearer <k>` for one of `keys` (constant time per key). */
export function bearerMatches(header: string | string[] | undefined, keys: readonly string[]): boolean {
  if (typeof header !== 'string') return false;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (match?.[1] === undefined) return false;
  const given = digest(match[1]);
  let ok = false;
  for (const key of keys) ok = timingSafeEqual(given, digest(key)) || ok;
  return ok;
}
