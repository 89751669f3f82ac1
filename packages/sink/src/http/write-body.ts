/**
 * The hot path of `POST /v1/writes` input checking: a validator compiled from the write request's
 * own schema (payload excepted), which accepts a SUBSET of what `WriteRequestSchema` (zod) accepts
 * — unknown keys refused instead of stripped — and returns the body itself. Anything it does not
 * accept goes through the full schema, which decides and describes the problem, so refusals keep
 * their codes and messages. The payload (any JSON value) is checked by the caller while it is
 * canonicalized. `write-body.test.ts` checks the subset property against the schema.
 */
import { compileValidator, WriteRequestSchema } from '@leasehold/protocol';
import { z } from 'zod';

export interface WriteHead {
  readonly resource: string;
  readonly token: string;
  readonly resultId: string;
  readonly workerId: string;
  readonly incarnation: string;
  readonly capability: string;
  readonly payload: unknown;
}

/** The write request with the payload left to the caller (checked while canonicalizing). */
export const WriteHeadSchema = WriteRequestSchema.extend({ payload: z.unknown() });

const isWriteHead = compileValidator(WriteHeadSchema);

/**
 * `body` as a {@link WriteHead} when it is certainly a valid write request apart from its payload
 * (which the caller checks); `undefined` when the full schema must decide.
 */
export function checkWriteHead(body: Record<string, unknown>): WriteHead | undefined {
  return isWriteHead(body) && Object.hasOwn(body, 'payload') ? body : undefined;
}
