/**
 * Write capabilities.
 *
 * With each grant the coordinator issues a capability that the sink checks on every write:
 * `v1.<keyId>.<base64url(HMAC-SHA256(key, canonical(resource, token, workerId, incarnation)))>`.
 * Coordinator and sink share the keys; several keys may be live at once (rotation), selected by
 * key id. A correct token without a valid capability is refused, so a worker cannot forge a grant.
 */
import { createHmac, createSecretKey, timingSafeEqual, type KeyObject } from 'node:crypto';

export interface CapabilityKey {
  readonly id: string;
  readonly secret: string;
}

export interface CapabilityClaims {
  readonly resource: string;
  readonly token: bigint;
  readonly workerId: string;
  readonly incarnation: string;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
/** base64url of 32 bytes, unpadded: 42 free characters and a last one whose low 2 bits are zero. */
const CANONICAL_MAC = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;

function canonicalClaims(claims: CapabilityClaims): string {
  // Length-prefixed fields: no separator ambiguity whatever the ids contain.
  // (= ['v1', resource, token, workerId, incarnation].map((p) => `${p.length}:${p}`).join('|'))
  const { resource, workerId, incarnation } = claims;
  const token = claims.token.toString(10);
  return `2:v1|${resource.length}:${resource}|${token.length}:${token}|${workerId.length}:${workerId}|${incarnation.length}:${incarnation}`;
}

/** HMAC keys imported once per secret (a string secret is re-imported on every createHmac). */
const keyObjects = new Map<string, KeyObject>();

function keyObjectOf(secret: string): KeyObject {
  let key = keyObjects.get(secret);
  if (key === undefined) {
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    if (keyObjects.size < 64) keyObjects.set(secret, key);
  }
  return key;
}

function mac(secret: string, claims: CapabilityClaims): Buffer {
  return createHmac('sha256', keyObjectOf(secret)).update(canonicalClaims(claims)).digest();
}

export function signCapability(key: CapabilityKey, claims: CapabilityClaims): string {
  if (!KEY_ID.test(key.id)) throw new Error(`invalid capability key id: ${key.id}`);
  return `v1.${key.id}.${mac(key.secret, claims).toString('base64url')}`;
}

/** Constant-time check of a capability against the live keys. */
export function verifyCapability(
  keys: readonly CapabilityKey[],
  capability: string,
  claims: CapabilityClaims,
): boolean {
  const parts = capability.split('.');
  if (parts.length !== 3 || parts[0] !== 'v1') return false;
  const [, keyId, encoded] = parts as [string, string, string];
  const key = keys.find((k) => k.id === keyId);
  if (key === undefined) return false;
  // Exactly the canonical encoding of a 32-byte MAC: 43 base64url characters, the last carrying
  // 4 bits (Buffer.from(..., 'base64url') would skip junk, so several strings would decode alike).
  if (!CANONICAL_MAC.test(encoded)) return false;
  const given = Buffer.from(encoded, 'base64url');
  const expected = mac(key.secret, claims);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * Parse `id:secret,id2:secret2` (the env form of a key ring). The first key signs; all verify.
 */
export function parseCapabilityKeys(text: string): CapabilityKey[] {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const at = entry.indexOf(':');
      const id = at > 0 ? entry.slice(0, at) : '';
      const secret = at > 0 ? entry.slice(at + 1) : '';
      if (!KEY_ID.test(id) || secret.length < 16) {
        throw new Error(
          'capability keys must look like id:secret with id [A-Za-z0-9_-]{1,32} and a secret of >= 16 chars',
        );
      }
      return { id, secret };
    });
}
