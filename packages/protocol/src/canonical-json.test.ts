import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, canonicalJsonOfParsed } from './canonical-json.js';

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

  it('canonicalJsonOfParsed equals canonicalJson on every JSON value, parsed back from text too', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(canonicalJsonOfParsed(value)).toBe(canonicalJson(value));
        const parsed = JSON.parse(JSON.stringify(value)) as unknown;
        expect(canonicalJsonOfParsed(parsed)).toBe(canonicalJson(parsed));
      }),
      { numRuns: 2_000 },
    );
    const indexKeys = JSON.parse('{"b":1,"10":2,"":3,"2":4,"01":5,"4294967295":6,"4294967294":7}') as unknown;
    expect(canonicalJsonOfParsed(indexKeys)).toBe(canonicalJson(indexKeys));
    const withProto = JSON.parse('{"__proto__":{"x":1},"a":[2,"\u2028",-0,1e-7]}') as unknown;
    expect(canonicalJsonOfParsed(withProto)).toBe(canonicalJson(withProto));
  });

  it('canonicalJsonOfParsed refuses what is not JSON (non-finite numbers, undefined, class instances)', () => {
    expect(canonicalJsonOfParsed(JSON.parse('{"x":1e400}'))).toBeUndefined();
    expect(canonicalJsonOfParsed(undefined)).toBeUndefined();
    expect(canonicalJsonOfParsed([1, undefined])).toBeUndefined();
    expect(canonicalJsonOfParsed({ d: new Date(0) })).toBeUndefined();
    expect(canonicalJsonOfParsed({ n: 1n })).toBeUndefined();
  });
});
