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
  type CapabilitySigningKey,
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

  it('with 0 entries caches nothing', () => {
    const verifier = new CapabilityVerifier(publicKeysOf(KEY), 0);
    expect(verify(verifier, sign(CLAIMS), CLAIMS)).toBe(true);
    expect(verifier.size).toBe(0);
  });
});
