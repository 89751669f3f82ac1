/** Bearer-key checks for the admin HTTP API and the worker WebSocket upgrade. */
import { createKeyRing, parseBearer } from '@leasehold/protocol';

/** True when `header` is `Bearer <k>` for one of `keys` (constant time, every key compared). */
export function bearerMatches(header: string | string[] | undefined, keys: readonly string[]): boolean {
  return createKeyRing(keys)(parseBearer(header));
}
