/**
 * The digest of a task payload stored in its record (`payloadDigest`): sha256, base64url, of the
 * payload's canonical JSON. A repeated submit is judged "same definition" by it, so neither a
 * submit's conflict check nor a list ever reads `inputs/<t>`.
 */
import { createHash } from 'node:crypto';
import { canonicalJson, type JsonValue } from '@leasehold/protocol';

/** sha256 (base64url) of a canonical JSON text. */
export function digestCanonical(canonical: string): string {
  return createHash('sha256').update(canonical).digest('base64url');
}

export function payloadDigest(payload: JsonValue): string {
  return digestCanonical(canonicalJson(payload));
}
