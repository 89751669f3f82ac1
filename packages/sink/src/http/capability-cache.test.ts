/**
 * The capability cache never turns a refusal into an acceptance: a hit needs the exact capability
 * string AND the same four claims; refusals are not remembered; the cache stays bounded.
 */
import { randomBytes } from 'node:crypto';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeysOf,
  signCapability,
  signVouch,
  type CapabilitySigningKey,
  type VouchedGrant,
} from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { CapabilityVerifier, type WireClaims } from './capability-cache.js';

const KEY: CapabilitySigningKey = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
/** Same key id, another key. */
const OTHER: CapabilitySigningKey = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
const CLAIMS: WireClaims = { resource: 'res', token: '5', workerId: 'w-1', incarnation: 'inc-1' };

function sign(claims: WireClaims, key = KEY): string {
  return signCapability(key, { ...claims, token: BigInt(claims.token) });
}

function verify(verifier: CapabilityVerifier, capability: string, claims: WireClaims): boolean {
  return verifier.verify(capability, claims, BigInt(claims.token));
}

describe('CapabilityVerifier', () => {
  it('accepts a valid capability, again from the cache', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    const capability = sign(CLAIMS);
    expect(verify(verifier, capability, CLAIMS)).toBe(true);
    expect(verifier.size).toBe(1);
    expect(verify(verifier, capability, CLAIMS)).toBe(true);
  });

  it('refuses a cached capability presented with any other claim', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    const capability = sign(CLAIMS);
    expect(verify(verifier, capability, CLAIMS)).toBe(true);
    const others: WireClaims[] = [
      { ...CLAIMS, resource: 'res2' },
      { ...CLAIMS, token: '6' },
      { ...CLAIMS, workerId: 'w-2' },
      { ...CLAIMS, incarnation: 'inc-2' },
    ];
    for (const claims of others) expect(verify(verifier, capability, claims)).toBe(false);
    // The refusals did not evict or replace the valid entry.
    expect(verify(verifier, capability, CLAIMS)).toBe(true);
  });

  it('does not remember refusals', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    const forged = sign(CLAIMS, OTHER);
    expect(verify(verifier, forged, CLAIMS)).toBe(false);
    expect(verify(verifier, 'garbage', CLAIMS)).toBe(false);
    expect(verifier.size).toBe(0);
  });

  it('is bound to its key ring', () => {
    const capability = sign(CLAIMS);
    expect(verify(new CapabilityVerifier(publicKeysOf(KEY)), capability, CLAIMS)).toBe(true);
    expect(verify(new CapabilityVerifier(publicKeysOf(OTHER)), capability, CLAIMS)).toBe(false);
  });

  it('stays bounded and evicts the least recently used entry', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY), 2);
    const a = { ...CLAIMS, resource: 'a' };
    const b = { ...CLAIMS, resource: 'b' };
    const c = { ...CLAIMS, resource: 'c' };
    expect(verify(verifier, sign(a), a)).toBe(true);
    expect(verify(verifier, sign(b), b)).toBe(true);
    expect(verify(verifier, sign(a), a)).toBe(true); // a is now the most recent
    expect(verify(verifier, sign(c), c)).toBe(true); // evicts b
    expect(verifier.size).toBe(2);
    // Evicted or not, a valid capability still verifies (by signature again).
    expect(verify(verifier, sign(b), b)).toBe(true);
  });

  it('a large cache past its bound drops its oldest eighth at once, keeping the newest', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY), 16);
    const grants = Array.from({ length: 17 }, (_, i) => ({
      ...CLAIMS,
      resource: `r${i}`,
      token: 5n,
      capability: `c${i}`,
    }));
    expect(verifier.vouched(signVouch(KEY, grants), grants)).toBe(true);
    expect(verifier.size).toBe(14);
    expect(verifier.check('c2', { ...CLAIMS, resource: 'r2' }, 5n)).toBe('refused');
    expect(verifier.check('c3', { ...CLAIMS, resource: 'r3' }, 5n)).toBe('vouched');
    expect(verifier.check('c16', { ...CLAIMS, resource: 'r16' }, 5n)).toBe('vouched');
  });

  it('with 0 entries caches nothing', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY), 0);
    expect(verify(verifier, sign(CLAIMS), CLAIMS)).toBe(true);
    expect(verifier.size).toBe(0);
  });
});

describe('CapabilityVerifier vouches', () => {
  /** A canonical-looking capability whose signature is NOT valid: only a vouch can make it pass. */
  const UNSIGNED = `v2.k1.${'A'.repeat(85)}A`;
  const grant = (claims: WireClaims, capability: string): VouchedGrant => ({
    ...claims,
    token: BigInt(claims.token),
    capability,
  });

  it('accepts a vouched capability for its claims without its own signature: vouched first, then cached', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    expect(verifier.check(UNSIGNED, CLAIMS, 5n)).toBe('refused');
    const grants = [grant(CLAIMS, UNSIGNED)];
    expect(verifier.vouched(signVouch(KEY, grants), grants)).toBe(true);
    expect(verifier.check(UNSIGNED, CLAIMS, 5n)).toBe('vouched');
    expect(verifier.check(UNSIGNED, CLAIMS, 5n)).toBe('cached');
    // A signed capability of another grant in the same vouch takes the same path.
    const other = { ...CLAIMS, resource: 'res2' };
    const both = [grant(other, sign(other)), grant(CLAIMS, UNSIGNED)];
    expect(verifier.vouched(signVouch(KEY, both), both)).toBe(true);
    expect(verifier.check(sign(other), other, 5n)).toBe('vouched');
  });

  it('refuses a vouched capability presented with any other claim', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    const grants = [grant(CLAIMS, UNSIGNED)];
    expect(verifier.vouched(signVouch(KEY, grants), grants)).toBe(true);
    for (const claims of [
      { ...CLAIMS, resource: 'res2' },
      { ...CLAIMS, token: '6' },
      { ...CLAIMS, workerId: 'w-2' },
      { ...CLAIMS, incarnation: 'inc-2' },
    ]) {
      expect(verifier.check(UNSIGNED, claims, BigInt(claims.token))).toBe('refused');
    }
  });

  it('ignores a vouch that does not verify: signed by a key outside the ring, or over other grants', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY));
    const grants = [grant(CLAIMS, UNSIGNED)];
    expect(verifier.vouched(signVouch(OTHER, grants), grants)).toBe(false);
    const signedFor = [grant({ ...CLAIMS, workerId: 'w-2' }, UNSIGNED)];
    expect(verifier.vouched(signVouch(KEY, signedFor), grants)).toBe(false);
    expect(verifier.size).toBe(0);
    expect(verifier.check(UNSIGNED, CLAIMS, 5n)).toBe('refused');
  });

  it('stays bounded however many grants a vouch lists', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY), 3);
    const grants = Array.from({ length: 10 }, (_, i) => grant({ ...CLAIMS, resource: `r${i}` }, `${UNSIGNED}${i}`));
    expect(verifier.vouched(signVouch(KEY, grants), grants)).toBe(true);
    expect(verifier.size).toBe(3);
    // The last three are kept; the earlier ones fell out and are refused (their strings are not signed).
    expect(verifier.check(`${UNSIGNED}9`, { ...CLAIMS, resource: 'r9' }, 5n)).toBe('vouched');
    expect(verifier.check(`${UNSIGNED}0`, { ...CLAIMS, resource: 'r0' }, 5n)).toBe('refused');
  });
});
