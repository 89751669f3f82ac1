import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { parseCapabilityKeys, signCapability, verifyCapability } from './capability.js';

const k1 = { id: 'k1', secret: 'a-secret-of-enough-length' };
const k2 = { id: 'k2', secret: 'another-secret-long-enough' };
const claims = { resource: 'orders/42', token: 17n, workerId: 'w1', incarnation: 'i1' };

describe('capabilities', () => {
  it('signs HMAC-SHA256 over the length-prefixed claims (the wire form peers verify)', () => {
    const canonical = ['v1', 'orders/42', '17', 'w1', 'i1'].map((p) => `${p.length}:${p}`).join('|');
    const expected = createHmac('sha256', k1.secret).update(canonical).digest('base64url');
    expect(canonical).toBe('2:v1|9:orders/42|2:17|2:w1|2:i1');
    expect(signCapability(k1, claims)).toBe(`v1.k1.${expected}`);
  });

  it('verifies a capability signed with any live key (rotation)', () => {
    const old = signCapability(k1, claims);
    const fresh = signCapability(k2, claims);
    expect(verifyCapability([k2, k1], old, claims)).toBe(true);
    expect(verifyCapability([k2, k1], fresh, claims)).toBe(true);
  });

  it('refuses a capability after its key is retired', () => {
    expect(verifyCapability([k2], signCapability(k1, claims), claims)).toBe(false);
  });

  it.each([
    ['resource', { ...claims, resource: 'orders/43' }],
    ['token', { ...claims, token: 18n }],
    ['worker', { ...claims, workerId: 'w2' }],
    ['incarnation', { ...claims, incarnation: 'i2' }],
  ])('binds the %s', (_what, other) => {
    expect(verifyCapability([k1], signCapability(k1, claims), other)).toBe(false);
  });

  it('is not fooled by field boundaries', () => {
    const a = signCapability(k1, { ...claims, resource: 'a', workerId: 'bc' });
    expect(verifyCapability([k1], a, { ...claims, resource: 'ab', workerId: 'c' })).toBe(false);
  });

  it.each(['', 'v1', 'v1.k1', 'v2.k1.AAAA', 'v1.k1.AAAA', 'v1.k1.!!!', 'v1.nokey.AAAA'])(
    'refuses malformed %j',
    (cap) => {
      expect(verifyCapability([k1], cap, claims)).toBe(false);
    },
  );

  it('parses a key ring and rejects weak entries', () => {
    expect(parseCapabilityKeys('k1:a-secret-of-enough-length, k2:another-secret-long-enough')).toEqual([k1, k2]);
    expect(() => parseCapabilityKeys('k1:short')).toThrow(/16/);
    expect(() => parseCapabilityKeys('bad id:a-secret-of-enough-length')).toThrow();
  });
});

describe('strict capability encoding', () => {
  it('accepts only the canonical base64url of the MAC: no junk, padding, whitespace or alternative last character', () => {
    const good = signCapability(k2, claims);
    expect(verifyCapability([k2], good, claims)).toBe(true);
    const mac = good.split('.')[2] ?? '';
    const last = mac.at(-1) ?? '';
    // Characters that decode to the same bytes under a lenient decoder.
    const sameBytes = 'AEIMQUYcgkosw048'.includes(last)
      ? 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'
          .split('')
          .filter(
            (c) => c !== last && Buffer.from(mac.slice(0, -1) + c, 'base64url').equals(Buffer.from(mac, 'base64url')),
          )
      : [];
    expect(sameBytes.length).toBeGreaterThan(0); // the lenient decoder really is lenient
    for (const variant of [
      ...sameBytes.map((c) => `v1.k2.${mac.slice(0, -1)}${c}`),
      `${good}=`,
      `${good}==`,
      `${good} `,
      `v1.k2.${mac.slice(0, 20)}*${mac.slice(20)}`,
      `v1.k2.${mac.slice(0, 20)}.${mac.slice(20)}`,
      `v1.k2.${mac}A`,
      `v1.k2.${mac.slice(0, -1)}`,
      `v1.k2.${Buffer.from(mac, 'base64url').toString('base64')}`,
    ]) {
      expect(verifyCapability([k2], variant, claims), variant).toBe(false);
    }
  });
});
