import { createPublicKey, generateKeyPairSync, randomBytes, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  generateCapabilitySeed,
  parseCapabilityPublicKeys,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  publicKeysOf,
  signCapability,
  signVouch,
  verifyCapability,
  verifyVouch,
  type VouchedGrant,
} from './capability.js';

const k1 = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
const k2 = parseCapabilitySigningKey(`k2:${generateCapabilitySeed(randomBytes)}`);
const ring = parseCapabilityPublicKeys(`${publicKeyEntryOf(k2)},${publicKeyEntryOf(k1)}`);
const claims = { resource: 'orders/42', token: 17n, workerId: 'w1', incarnation: 'i1' };

/** The group order of Ed25519, little-endian in a signature's S half. */
const L = 2n ** 252n + 27742317777372353535851937790883648493n;

describe('capabilities', () => {
  it('is an Ed25519 signature over the length-prefixed claims (the wire form peers verify)', () => {
    const canonical = ['v2', 'orders/42', '17', 'w1', 'i1'].map((p) => `${p.length}:${p}`).join('|');
    expect(canonical).toBe('2:v2|9:orders/42|2:17|2:w1|2:i1');
    const cap = signCapability(k1, claims);
    const [version, id, sig] = cap.split('.');
    expect([version, id]).toEqual(['v2', 'k1']);
    expect(verify(null, Buffer.from(canonical), k1.publicKey, Buffer.from(sig ?? '', 'base64url'))).toBe(true);
  });

  it('is deterministic: a replayed grant gets the same capability', () => {
    expect(signCapability(k1, claims)).toBe(signCapability(k1, { ...claims }));
  });

  it('verifies with public keys only: a verifier holds nothing that signs', () => {
    // The ring holds public KeyObjects: there is no private key in it to sign with.
    for (const k of ring) expect(k.key.type).toBe('public');
    expect(verifyCapability(ring, signCapability(k1, claims), claims)).toBe(true);
  });

  it('verifies a capability signed with any live key (rotation)', () => {
    expect(verifyCapability(ring, signCapability(k1, claims), claims)).toBe(true);
    expect(verifyCapability(ring, signCapability(k2, claims), claims)).toBe(true);
  });

  it('refuses a capability after its key is retired, and a key id that names another key', () => {
    expect(verifyCapability(publicKeysOf(k2), signCapability(k1, claims), claims)).toBe(false);
    const renamed = signCapability(k1, claims).replace('.k1.', '.k2.');
    expect(verifyCapability(ring, renamed, claims)).toBe(false);
  });

  it.each([
    ['resource', { ...claims, resource: 'orders/43' }],
    ['token', { ...claims, token: 18n }],
    ['worker', { ...claims, workerId: 'w2' }],
    ['incarnation', { ...claims, incarnation: 'i2' }],
  ])('binds the %s', (_what, other) => {
    expect(verifyCapability(ring, signCapability(k1, claims), other)).toBe(false);
  });

  it('is not fooled by field boundaries', () => {
    const a = signCapability(k1, { ...claims, resource: 'a', workerId: 'bc' });
    expect(verifyCapability(ring, a, { ...claims, resource: 'ab', workerId: 'c' })).toBe(false);
  });

  it('refuses a v1 (HMAC) capability and malformed ones', () => {
    const sig = signCapability(k1, claims).split('.')[2] ?? '';
    for (const cap of [
      '',
      'v2',
      'v2.k1',
      'v1.k1.' + sig,
      'v2.k1.AAAA',
      'v2.k1.!!!',
      'v2.nokey.' + sig,
      'v3.k1.' + sig,
    ]) {
      expect(verifyCapability(ring, cap, claims), cap).toBe(false);
    }
  });

  it('parses keys and rejects bad entries with a clear message', () => {
    expect(() => parseCapabilitySigningKey('k1:short')).toThrow(/32-byte Ed25519 seed/);
    expect(() => parseCapabilitySigningKey(`bad id:${generateCapabilitySeed(randomBytes)}`)).toThrow(/id:key/);
    expect(() => parseCapabilityPublicKeys('k1:AAAA')).toThrow(/32-byte Ed25519 public key/);
    expect(() => parseCapabilityPublicKeys(`${publicKeyEntryOf(k1)},${publicKeyEntryOf(k1)}`)).toThrow(/twice/);
    // The public form derived from a seed is the raw key openssl or any Ed25519 library prints.
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const seed = privateKey.export({ format: 'der', type: 'pkcs8' }).subarray(-32).toString('base64url');
    const parsed = parseCapabilitySigningKey(`k9:${seed}`);
    expect(parsed.publicKeyText).toBe(publicKey.export({ format: 'jwk' }).x);
    expect(createPublicKey(parsed.privateKey).export({ format: 'jwk' }).x).toBe(parsed.publicKeyText);
  });
});

describe('strict capability encoding', () => {
  it('accepts only the canonical base64url of the signature: no junk, padding, whitespace or alternative last character', () => {
    const good = signCapability(k2, claims);
    expect(verifyCapability(ring, good, claims)).toBe(true);
    const sig = good.split('.')[2] ?? '';
    const last = sig.at(-1) ?? '';
    // Characters that decode to the same bytes under a lenient decoder.
    const sameBytes = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
      .split('')
      .filter(
        (c) => c !== last && Buffer.from(sig.slice(0, -1) + c, 'base64url').equals(Buffer.from(sig, 'base64url')),
      );
    expect(sameBytes.length).toBeGreaterThan(0); // the lenient decoder really is lenient
    for (const variant of [
      ...sameBytes.map((c) => `v2.k2.${sig.slice(0, -1)}${c}`),
      `${good}=`,
      `${good}==`,
      `${good} `,
      ` ${good}`,
      `v2.k2.${sig.slice(0, 20)}*${sig.slice(20)}`,
      `v2.k2.${sig.slice(0, 20)}.${sig.slice(20)}`,
      `v2.k2.${sig}A`,
      `v2.k2.${sig.slice(0, -1)}`,
      `v2.k2.${Buffer.from(sig, 'base64url').toString('base64')}`,
      `V2.k2.${sig}`,
    ]) {
      expect(verifyCapability(ring, variant, claims), variant).toBe(false);
    }
  });

  it('refuses the malleated signature (S + L): one valid capability per grant', () => {
    const good = signCapability(k1, claims);
    const raw = Buffer.from(good.split('.')[2] ?? '', 'base64url');
    const s = BigInt(`0x${Buffer.from(raw.subarray(32)).reverse().toString('hex')}`);
    const malleated = s + L;
    expect(malleated < 2n ** 256n).toBe(true);
    const sBytes = Buffer.from(malleated.toString(16).padStart(64, '0'), 'hex').reverse();
    const other = Buffer.concat([raw.subarray(0, 32), sBytes]).toString('base64url');
    expect(other).not.toBe(good.split('.')[2]);
    expect(verifyCapability(ring, `v2.k1.${other}`, claims)).toBe(false);
  });
});

describe('vouches (a fence advance vouching for the capabilities of its grants)', () => {
  const grants: VouchedGrant[] = [
    { ...claims, capability: signCapability(k1, claims) },
    { resource: 'orders/43', token: 18n, workerId: 'w2', incarnation: 'i2', capability: 'v2.k1.anything' },
  ];

  it('verifies over exactly the grants, in order, under a live key', () => {
    const vouch = signVouch(k1, grants);
    expect(verifyVouch(ring, vouch, grants)).toBe(true);
    expect(verifyVouch(ring, signVouch(k2, grants), grants)).toBe(true);
    expect(verifyVouch(ring, vouch, [...grants].reverse())).toBe(false);
    expect(verifyVouch(ring, vouch, grants.slice(0, 1))).toBe(false);
    expect(verifyVouch(ring, vouch, [...grants, grants[0] as VouchedGrant])).toBe(false);
  });

  it('binds every field of every grant, the capability included', () => {
    const vouch = signVouch(k1, grants);
    const [first, second] = grants as [VouchedGrant, VouchedGrant];
    const changed: VouchedGrant[] = [
      { ...second, resource: 'orders/44' },
      { ...second, token: 19n },
      { ...second, workerId: 'w3' },
      { ...second, incarnation: 'i3' },
      { ...second, capability: 'v2.k1.other' },
    ];
    for (const g of changed) expect(verifyVouch(ring, vouch, [first, g])).toBe(false);
    // Field boundaries: moving characters from one field to the next is another message.
    expect(verifyVouch(ring, vouch, [first, { ...second, workerId: 'w2i', incarnation: '2' }])).toBe(false);
  });

  it('is refused under an unknown or retired key, and in a malformed encoding', () => {
    const stranger = parseCapabilitySigningKey(`k1:${generateCapabilitySeed(randomBytes)}`);
    expect(verifyVouch(ring, signVouch(stranger, grants), grants)).toBe(false);
    const retired = parseCapabilityPublicKeys(publicKeyEntryOf(k2));
    expect(verifyVouch(retired, signVouch(k1, grants), grants)).toBe(false);
    const vouch = signVouch(k1, grants);
    for (const bad of [`${vouch}=`, vouch.replace('v2.', 'v1.'), `${vouch}.x`, '']) {
      expect(verifyVouch(ring, bad, grants)).toBe(false);
    }
  });

  it('is never a capability, nor a capability a vouch (separate first fields)', () => {
    // A vouch of no grants signs the shortest vouch message; no claims make it a capability.
    const empty = signVouch(k1, []);
    expect(verifyVouch(ring, empty, [])).toBe(true);
    expect(verifyCapability(ring, empty, claims)).toBe(false);
    // A capability presented as the vouch of its own grant does not verify.
    expect(verifyVouch(ring, grants[0]?.capability ?? '', grants.slice(0, 1))).toBe(false);
    const sig = Buffer.from(signCapability(k1, claims).split('.')[2] ?? '', 'base64url');
    const vouchMessage = Buffer.from(
      `8:v2-vouch|1:1|9:orders/42|2:17|2:w1|2:i1|${String(grants[0]?.capability.length)}:${grants[0]?.capability}`,
    );
    expect(verify(null, vouchMessage, k1.publicKey, sig)).toBe(false);
  });

  it('is an Ed25519 signature over the length-prefixed grants (the wire form sinks verify)', () => {
    const g = grants[1] as VouchedGrant;
    const canonical = `8:v2-vouch|1:1|9:orders/43|2:18|2:w2|2:i2|${g.capability.length}:${g.capability}`;
    const [version, id, sig] = signVouch(k1, [g]).split('.');
    expect([version, id]).toEqual(['v2', 'k1']);
    expect(verify(null, Buffer.from(canonical), k1.publicKey, Buffer.from(sig ?? '', 'base64url'))).toBe(true);
  });
});
