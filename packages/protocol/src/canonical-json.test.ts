import { describe, expect, it } from 'vitest';
import { canonicalJson } from './canonical-json.js';

describe('canonicalJson', () => {
  it('sorts keys at every depth and keeps arrays in order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: null } })).toBe(
      '{"a":{"c":null,"d":[3,{"y":2,"z":1}]},"b":1}',
    );
  });

  it('keeps a "__proto__" key, so different payloads never compare equal', () => {
    const withProto = JSON.parse('{"__proto__":{"x":1},"a":2}') as unknown;
    expect(canonicalJson(withProto)).toBe('{"__proto__":{"x":1},"a":2}');
    expect(canonicalJson(withProto)).not.toBe(canonicalJson({ a: 2 }));
  });
});
