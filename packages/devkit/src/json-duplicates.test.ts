import { describe, expect, it } from 'vitest';
import { findDuplicateKeys } from './json-duplicates.js';

describe('findDuplicateKeys', () => {
  it.each([
    ['{"a":1,"b":2}', []],
    ['{"component":"coordinator","x":1,"component":"http"}', [{ path: '$', key: 'component' }]],
    ['{"req":{"h":{"a":"1","a":"2"}},"a":3}', [{ path: '$.req.h', key: 'a' }]],
    ['[{"a":1},{"a":2}]', []],
    [
      '[{"a":1,"a":[{"b":1,"b":null}]}]',
      [
        { path: '$[0]', key: 'a' },
        { path: '$[0].a[0]', key: 'b' },
      ],
    ],
    ['{"s":"{\\"a\\":1,\\"a\\":2}","e":{},"l":[],"n":-1.5e3,"t":true}', []],
    ['{"k\\"":1,"k\\"":2}', [{ path: '$', key: 'k"' }]],
  ])('%s', (text, expected) => {
    expect(findDuplicateKeys(text)).toEqual(expected);
  });

  it.each(['{"a":1', '{"a" 1}', '{"a":1}x', '[1,]', '{"a":nope}'])('throws on %s', (text) => {
    expect(() => findDuplicateKeys(text)).toThrow(SyntaxError);
  });
});
