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
 * Vouches fill the cache ahead of the writes: a fence advance may carry the coordinator's signature
 * over the grants it is made for (`verifyVouch`, one Ed25519 verification per advance request, which
 * the advance route checks before calling `vouched`). Each listed capability is then remembered for
 * its claims as if it had been verified here, so the grant's first write costs a map lookup instead
 * of an Ed25519 verification (~75 µs on the bench machine: half of the sink's CPU per write). Only
 * the holder of the capability signing key can make a vouch, as only it can make a capability.
 *
 * Bounded LRU over a Map (insertion order = recency): a hit moves its entry to the end, an insert
 * past `maxEntries` drops the oldest (the oldest eighth at once, for large caches). Memory is at most `maxEntries` × (capability + claims), each
 * bounded by the schemas (capability ≤ 512 characters, ids ≤ their limits).
 */
import { verifyCapability, verifyVouch, type CapabilityPublicKey, type VouchedGrant } from '@leasehold/protocol';

/** The claims of a write as they arrive on the wire (the token as its canonical decimal string). */
export interface WireClaims {
  readonly resource: string;
  /** Decimal, no sign or leading zeros (schema-checked), so string equality is token equality. */
  readonly token: string;
  readonly workerId: string;
  readonly incarnation: string;
}

/** The default of `CAPABILITY_CACHE_ENTRIES` (config.ts): ≤ ~23 MB (≤ 1.4 KB per entry in the sink bench). */
export const DEFAULT_CAPABILITY_CACHE_ENTRIES = 16_384;

/**
 * How a capability check ended: found in the cache (`cached`), found there from a vouch, its first
 * use (`vouched`), its signature verified now (`verified`), or refused.
 */
export type CapabilityCheck = 'cached' | 'vouched' | 'verified' | 'refused';

interface Entry extends WireClaims {
  /** Put there by a vouch and not used since. */
  fromVouch: boolean;
}

export class CapabilityVerifier {
  readonly #keys: readonly CapabilityPublicKey[];
  readonly #maxEntries: number;
  readonly #verified = new Map<string, Entry>();

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
    return this.check(capability, claims, token) !== 'refused';
  }

  /** {@link verify}, telling how it was decided. */
  check(capability: string, claims: WireClaims, token: bigint): CapabilityCheck {
    const hit = this.#verified.get(capability);
    if (
      hit !== undefined &&
      hit.resource === claims.resource &&
      hit.token === claims.token &&
      hit.workerId === claims.workerId &&
      hit.incarnation === claims.incarnation
    ) {
      const fromVouch = hit.fromVouch;
      hit.fromVouch = false;
      this.#verified.delete(capability);
      this.#verified.set(capability, hit);
      return fromVouch ? 'vouched' : 'cached';
    }
    const { resource, workerId, incarnation } = claims;
    if (!verifyCapability(this.#keys, capability, { resource, token, workerId, incarnation })) return 'refused';
    this.#remember(capability, { resource, token: claims.token, workerId, incarnation, fromVouch: false });
    return 'verified';
  }

  /**
   * Remember every grant of `grants` when `vouch` is this key ring's valid signature over them
   * (in this order); false, remembering nothing, when it is not.
   */
  vouched(vouch: string, grants: readonly VouchedGrant[]): boolean {
    if (!verifyVouch(this.#keys, vouch, grants)) return false;
    for (const g of grants) {
      const { resource, workerId, incarnation, capability } = g;
      this.#remember(capability, { resource, token: g.token.toString(10), workerId, incarnation, fromVouch: true });
    }
    return true;
  }

  #remember(capability: string, entry: Entry): void {
    if (this.#maxEntries <= 0) return;
    this.#verified.delete(capability);
    this.#verified.set(capability, entry);
    if (this.#verified.size > this.#maxEntries) this.#evict();
  }

  /**
   * Drop the oldest eighth (at least one) in one pass. Evicting one at a time with
   * `keys().next()` walked the deleted slots V8 keeps at the front of the map until it rehashes:
   * at 400k entries that was 70 % of a sink's CPU while vouches filled the cache.
   */
  #evict(): void {
    const keep = this.#maxEntries - Math.floor(this.#maxEntries / 8);
    let drop = this.#verified.size - keep;
    for (const key of this.#verified.keys()) {
      if (drop-- <= 0) break;
      this.#verified.delete(key);
    }
  }
}
