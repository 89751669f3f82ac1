/** Bearer keys of the sink's routes (constant-time key rings from @leasehold/protocol). */
import { parseBearer } from '@leasehold/protocol';
import type { FastifyRequest } from 'fastify';

export { createKeyRing, type KeyRing } from '@leasehold/protocol';

/** The key of an `Authorization: Bearer <key>` header, if the header has that form. */
export function bearerOf(request: FastifyRequest): string | undefined {
  return parseBearer(request.headers.authorization);
}
