/**
 * Bearer keys (`Authorization: Bearer <key>`), shared by the sink and the coordinator.
 *
 * Keys are compared in constant time: both sides are hashed to SHA-256 (equal lengths) and compared
 * with `timingSafeEqual` against EVERY configured key, so neither the match position nor the key
 * lengths leak through timing.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** True when the presented key is one of the ring's keys. */
export type KeyRing = (presented: string | undefined) => boolean;

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

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

/** The key of an `Authorization: Bearer <key>` header value, if it has that form. */
export function parseBearer(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  return /^Bearer +(\S+) *$/i.exec(header)?.[1];
}
