/**
 * Write capabilities: Ed25519 signatures that only the coordinator can make.
 *
 * With each grant the coordinator issues a capability that the sink (and `fencedTransaction` of
 * `@leasehold/fence-pg`, and any service of yours) checks on every write:
 *
 *   `v2.<keyId>.<base64url(Ed25519(signingKey, canonical(resource, token, workerId, incarnation)))>`
 *
 * The coordinator holds the private signing key; verifiers hold only public keys, so no process
 * that checks a capability — a sink, a worker calling fence-pg, a service of yours — can make one
 * (an HMAC key, as in v1, would let every verifier sign a capability for any token). Several public
 * keys may be live at once (rotation), selected by key id. A correct token without a valid
 * capability is refused, so a worker cannot forge a grant.
 *
 * One spelling per capability: the signature is accepted only in its canonical unpadded base64url
 * form (the 4 spare bits of the last character zero), and OpenSSL's Ed25519 verification refuses a
 * non-reduced scalar, so a valid capability cannot be re-encoded into a second valid one. Ed25519
 * signatures are deterministic: a replayed grant gets the very same capability string.
 */
import { createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';

/** A public key that verifies capabilities (the sink's, fence-pg's and your services' ring). */
export interface CapabilityPublicKey {
  readonly id: string;
  readonly key: KeyObject;
}

/** The coordinator's signing key. `publicKey` is what verifiers need (`id:<publicKeyText>`). */
export interface CapabilitySigningKey {
  readonly id: string;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  /** base64url of the raw 32-byte public key: the form `CAPABILITY_PUBLIC_KEYS` takes. */
  readonly publicKeyText: string;
}

export interface CapabilityClaims {
  readonly resource: string;
  readonly token: bigint;
  readonly workerId: string;
  readonly incarnation: string;
}

const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
/** base64url of 32 bytes, unpadded: 42 free characters and a last one whose low 2 bits are zero. */
const CANONICAL_KEY = /^[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]$/;
/** base64url of a 64-byte signature, unpadded: 85 free characters and a last one whose low 4 bits are zero. */
const CANONICAL_SIGNATURE = /^[A-Za-z0-9_-]{85}[AQgw]$/;
/** The DER prefix of a PKCS#8 Ed25519 private key; the 32-byte seed follows. */
const PKCS8_ED25519_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

export const CAPABILITY_VERSION = 'v2';

function canonicalClaims(claims: CapabilityClaims): Buffer {
  // Length-prefixed fields: no separator ambiguity whatever the ids contain.
  // (= ['v2', resource, token, workerId, incarnation].map((p) => `${p.length}:${p}`).join('|'))
  const { resource, workerId, incarnation } = claims;
  const token = claims.token.toString(10);
  return Buffer.from(
    `2:v2|${resource.length}:${resource}|${token.length}:${token}|${workerId.length}:${workerId}|${incarnation.length}:${incarnation}`,
    'utf8',
  );
}

export function signCapability(key: CapabilitySigningKey, claims: CapabilityClaims): string {
  if (!KEY_ID.test(key.id)) throw new Error(`invalid capability key id: ${key.id}`);
  return `${CAPABILITY_VERSION}.${key.id}.${sign(null, canonicalClaims(claims), key.privateKey).toString('base64url')}`;
}

/** Check a capability against the live public keys. */
export function verifyCapability(
  keys: readonly CapabilityPublicKey[],
  capability: string,
  claims: CapabilityClaims,
): boolean {
  return verifySigned(keys, capability, () => canonicalClaims(claims));
}

/** `v2.<keyId>.<canonical base64url signature>` over `message()` under the key named by keyId. */
function verifySigned(keys: readonly CapabilityPublicKey[], signed: string, message: () => Buffer): boolean {
  const parts = signed.split('.');
  if (parts.length !== 3 || parts[0] !== CAPABILITY_VERSION) return false;
  const [, keyId, encoded] = parts as [string, string, string];
  const key = keys.find((k) => k.id === keyId);
  if (key === undefined) return false;
  // Exactly the canonical encoding of a 64-byte signature (Buffer.from(..., 'base64url') would skip
  // junk and ignore spare bits, so several strings would decode alike).
  if (!CANONICAL_SIGNATURE.test(encoded)) return false;
  try {
    return verify(null, message(), key.key, Buffer.from(encoded, 'base64url'));
  } catch {
    return false;
  }
}

/** One grant a fence advance vouches for: its claims and the capability issued with it. */
export interface VouchedGrant extends CapabilityClaims {
  readonly capability: string;
}

/**
 * What a vouch signs. Length-prefixed like the claims, and under its own first field (`8:v2-vouch`,
 * where a capability's claims begin `2:v2`), so no byte string is both a capability's claims and a
 * vouch: a signature made for one never verifies as the other.
 */
function canonicalVouch(grants: readonly VouchedGrant[]): Buffer {
  const parts = ['8:v2-vouch', `${String(grants.length).length}:${grants.length}`];
  for (const g of grants) {
    const token = g.token.toString(10);
    parts.push(
      `${g.resource.length}:${g.resource}`,
      `${token.length}:${token}`,
      `${g.workerId.length}:${g.workerId}`,
      `${g.incarnation.length}:${g.incarnation}`,
      `${g.capability.length}:${g.capability}`,
    );
  }
  return Buffer.from(parts.join('|'), 'utf8');
}

/**
 * The coordinator's signature over the grants of one fence advance (`v2.<keyId>.<signature>`), made
 * with the capability signing key: "I issued exactly these capabilities for exactly these claims".
 * A sink that checks it once may accept each listed capability for its claims without checking that
 * capability's own signature — one Ed25519 verification per advance request instead of one per
 * grant. It grants nothing a capability does not: only the holder of the signing key can make either.
 */
export function signVouch(key: CapabilitySigningKey, grants: readonly VouchedGrant[]): string {
  if (!KEY_ID.test(key.id)) throw new Error(`invalid capability key id: ${key.id}`);
  return `${CAPABILITY_VERSION}.${key.id}.${sign(null, canonicalVouch(grants), key.privateKey).toString('base64url')}`;
}

/** Check a vouch over `grants` (in the order they were signed) against the live public keys. */
export function verifyVouch(
  keys: readonly CapabilityPublicKey[],
  vouch: string,
  grants: readonly VouchedGrant[],
): boolean {
  return verifySigned(keys, vouch, () => canonicalVouch(grants));
}

/** A new signing key (for `leasehold cluster up`, tests and `keygen`). `seedText` is the secret form. */
export function generateCapabilitySeed(randomBytes: (n: number) => Buffer): string {
  return randomBytes(32).toString('base64url');
}

function keyIdOf(entry: string, what: string): { id: string; rest: string } {
  const at = entry.indexOf(':');
  const id = at > 0 ? entry.slice(0, at) : '';
  if (!KEY_ID.test(id)) throw new Error(`${what} must look like id:key with id [A-Za-z0-9_-]{1,32}`);
  return { id, rest: entry.slice(at + 1) };
}

/**
 * Parse `id:<base64url 32-byte seed>` (the coordinator's `CAPABILITY_SIGNING_KEY`). The seed is
 * the secret; `openssl genpkey -algorithm ed25519 -outform DER | tail -c 32 | basenc --base64url`
 * (without the `=` padding) makes one, as does `leasehold cluster up`.
 */
export function parseCapabilitySigningKey(text: string): CapabilitySigningKey {
  const { id, rest } = keyIdOf(text.trim(), 'the capability signing key');
  const seed = rest.replace(/=+$/, '');
  if (!CANONICAL_KEY.test(seed)) {
    throw new Error('the capability signing key must be id:<base64url of a 32-byte Ed25519 seed> (43 characters)');
  }
  const privateKey = createPrivateKey({
    key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(seed, 'base64url')]),
    format: 'der',
    type: 'pkcs8',
  });
  const publicKey = createPublicKey(privateKey);
  const jwk = publicKey.export({ format: 'jwk' });
  if (typeof jwk.x !== 'string') throw new Error('could not derive the capability public key');
  return { id, privateKey, publicKey, publicKeyText: jwk.x };
}

/** Parse `id:<base64url 32-byte public key>,id2:…` (the verifiers' `CAPABILITY_PUBLIC_KEYS`). */
export function parseCapabilityPublicKeys(text: string): CapabilityPublicKey[] {
  const keys = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0)
    .map((entry) => {
      const { id, rest } = keyIdOf(entry, 'capability public keys');
      const x = rest.replace(/=+$/, '');
      if (!CANONICAL_KEY.test(x)) {
        throw new Error(
          `capability public key ${id} must be the base64url of a 32-byte Ed25519 public key (43 characters)`,
        );
      }
      let key: KeyObject;
      try {
        key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
      } catch (err) {
        throw new Error(`capability public key ${id} is not an Ed25519 public key`, { cause: err });
      }
      return { id, key };
    });
  const ids = new Set<string>();
  for (const k of keys) {
    if (ids.has(k.id)) throw new Error(`capability public key id ${k.id} is given twice`);
    ids.add(k.id);
  }
  return keys;
}

/** The `id:<public key>` entry of a signing key: what to add to every verifier's ring. */
export function publicKeyEntryOf(key: CapabilitySigningKey): string {
  return `${key.id}:${key.publicKeyText}`;
}

/** The ring a verifier of this signing key needs (tests, in-process clusters). */
export function publicKeysOf(key: CapabilitySigningKey): CapabilityPublicKey[] {
  return [{ id: key.id, key: key.publicKey }];
}
