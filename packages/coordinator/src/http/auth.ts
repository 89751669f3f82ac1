/** Bearer-key checks for the admin HTTP API and the worker WebSocket upgrade. */
import { createKeyRing, parseBearer } from '@leasehold/protocol';

/** A check of an `Authorization` header against `keys`, built once (constant time, every key compared). */
export function bearerCheck(keys: readonly string[]): (header: string | string[] | undefined) => boolean {
  const ring = createKeyRing(keys);
  return (header) => ring(parseBearer(header));
}
