/**
 * Write-capability checks with a bounded cache of successes.
 *
 * A worker sends the same capability string with every write under one grant, and checking it
 * (an Ed25519 verification, tens of microseconds; HMAC-SHA256 before it was already ~13% of the
 * sink's main-thread CPU under write load) is a pure function of (capability string, claims, public
 * key ring), so a success can be remembered: the cache maps the EXACT capability string to the claims it verified for, and a
 * lookup hits only when all four claims are equal too. The key ring is fixed per cache (one per
 * HTTP app, built from the frozen config). Refusals are never cached: a wrong or forged capability
 * pays the full verification every time, and a hit reveals nothing an attacker did not already send.
 *
 * Bounded LRU over a Map (insertion order = recency): a hit moves its entry to the end, an insert
 * past `maxEntries` drops the oldest. Memory is at most `maxEntries` × (capability + claims).
 */
import { verifyCapability, type CapabilityPublicKey } from '@leasehold/protocol';

/** The claims of a write as they arrive on the wire (the token as its canonical decimal string). */
export interface WireClaims {
  readonly resource: string;
  /** Decimal, no sign or leading zeros (schema-checked), so string equality is token equality. */
  readonly token: string;
  readonly workerId: string;
  readonly incarnation: string;
}

export const DEFAULT_CAPABILITY_CACHE_ENTRIES = 4096;

export class CapabilityVerifier {
  readonly #keys: readonly CapabilityPublicKey[];
  readonly #maxEntries: number;
  readonly #verified = new Map<string, WireClaims>();

  constructor(keys: readonly CapabilityPublicKey[], maxEntries = DEFAULT_CAPABILITY_CACHE_ENTRIES) {
    this.#keys = keys;
    this.#maxEntries = maxEntries;
  }

  /** Entries currently cached (for tests). */
  get size(): number {
    return this.#verified.size;
  }

  /** True when `capability` is valid for `claims` under this verifier's key ring; `token` is `claims.token` parsed. */
  verify(capability: string, claims: WireClaims, token: bigint): boolean {
    const hit = this.#verified.get(capability);
    if (
      hit !== undefined &&
      hit.resource === claims.resource &&
      hit.token === claims.token &&
      hit.workerId === claims.workerId &&
      hit.incarnation === claims.incarnation
    ) {
      this.#verified.delete(capability);
      this.#verified.set(capability, hit);
      return true;
    }
    const { resource, workerId, incarnation } = claims;
    if (!verifyCapability(this.#keys, capability, { resource, token, workerId, incarnation })) return false;
    if (this.#maxEntries > 0) {
      this.#verified.delete(capability);
      this.#verified.set(capability, { resource, token: claims.token, workerId, incarnation });
      if (this.#verified.size > this.#maxEntries) {
        const oldest = this.#verified.keys().next();
        if (oldest.done !== true) this.#verified.delete(oldest.value);
      }
    }
    return true;
  }
}
