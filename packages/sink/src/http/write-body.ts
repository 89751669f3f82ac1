/**
 * The hot path of `POST /v1/writes` input checking: a hand-written test of the common, valid body
 * that accepts a SUBSET of what `WriteRequestSchema` (zod) accepts, without zod's per-check
 * machinery. Anything it does not accept goes through the full schema, which decides and describes
 * the problem, so refusals keep their codes and messages. `write-body.test.ts` checks the subset
 * property against the schema (tables of bad values and generated bodies).
 *
 * The rules, from @leasehold/protocol (`ids.ts`, `token.ts`, `messages/sink.ts`; the id, token and
 * incarnation predicates are the protocol's own, shared with the coordinator's frame decoder):
 *   exactly the keys resource, token, resultId, workerId, incarnation, capability, payload
 *   resource, resultId, workerId  1-200 chars of [A-Za-z0-9._:/@-], not starting with /, no // or ..
 *   token                         positive decimal, no leading zeros, <= int64 max
 *   incarnation                   1-64 chars of [A-Za-z0-9._-]
 *   capability                    1-512 chars
 *   payload                       any JSON value (checked while canonicalizing, by the caller)
 */
import { isIdText as isId, isIncarnationText, isTokenText as isToken } from '@leasehold/protocol';

export interface WriteHead {
  readonly resource: string;
  readonly token: string;
  readonly resultId: string;
  readonly workerId: string;
  readonly incarnation: string;
  readonly capability: string;
  readonly payload: unknown;
}

const WRITE_KEYS = 7;
const CAPABILITY_MAX_LENGTH = 512;

/**
 * `body` as a {@link WriteHead} when it is certainly a valid write request apart from its payload
 * (which the caller checks); `undefined` when the full schema must decide.
 */
export function checkWriteHead(body: Record<string, unknown>): WriteHead | undefined {
  const { resource, token, resultId, workerId, incarnation, capability } = body;
  if (
    !isId(resource) ||
    !isToken(token) ||
    !isId(resultId) ||
    !isId(workerId) ||
    !isIncarnationText(incarnation) ||
    typeof capability !== 'string' ||
    capability.length < 1 ||
    capability.length > CAPABILITY_MAX_LENGTH ||
    !Object.hasOwn(body, 'payload') ||
    Object.keys(body).length !== WRITE_KEYS
  ) {
    return undefined;
  }
  return { resource, token, resultId, workerId, incarnation, capability, payload: body['payload'] };
}
