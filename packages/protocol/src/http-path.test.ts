import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalPathByUrl, normalizePath } from './http-path.js';

/**
 * The definition `normalizePath` keeps: its path as the WHATWG URL parse makes it, the query kept,
 * the fragment dropped (the whole text as it came when the parse refuses it).
 */
function byUrl(rawUrl: string): string {
  const cut = rawUrl.search(/[?#]/);
  const rawPath = cut === -1 ? rawUrl : rawUrl.slice(0, cut);
  const rest = cut === -1 ? '' : rawUrl.slice(cut);
  const query = rest.startsWith('#') ? '' : (rest.split('#', 1)[0] ?? '');
  const path = canonicalPathByUrl(rawPath);
  return path === undefined ? rawUrl : `${path}${query}`;
}

/** Pieces of request targets: every character class the fast path must tell apart. */
const PIECES = [
  '/',
  '/',
  '.',
  '..',
  'a',
  'Z',
  '0',
  '%',
  '%2e',
  '%2E',
  '%2F',
  '2',
  'e',
  '?',
  '#',
  '\\',
  ' ',
  '\t',
  '"',
  '<',
  '^',
  '|',
  '`',
  '{',
  'é',
  '~',
  '@',
  ':',
  ';',
  '=',
  '&',
  '+',
  '*',
  '-',
  '_',
  'v1',
  'writes',
];

describe('normalizePath', () => {
  it.each([
    ['/v1/tasks', '/v1/tasks'],
    ['//v1///tasks', '/v1/tasks'],
    ['/a/../v1/./tasks', '/v1/tasks'],
    ['/v1/%2e%2e/v1/tasks', '/v1/tasks'],
    ['/v1/%2E/tasks', '/v1/tasks'],
    ['/v1/tasks?x=1', '/v1/tasks?x=1'],
    ['/v1/tasks?x=1#f', '/v1/tasks?x=1'],
    ['/v1/tasks#f?x', '/v1/tasks'],
    ['/v1/tasks/a%2Fb', '/v1/tasks/a%2Fb'],
    ['/../../etc/passwd', '/etc/passwd'],
    ['/%761/tasks', '/%761/tasks'],
  ])('%s -> %s', (input, output) => {
    expect(normalizePath(input)).toBe(output);
  });

  it('is the URL parse of the path, fast path or not, for any request target', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...PIECES), { maxLength: 16 }), (pieces) => {
        const url = pieces.join('');
        expect(normalizePath(url)).toBe(byUrl(url));
      }),
      { numRuns: 20_000 },
    );
  });

  it('keeps a canonical path as it came (the fast path), query included', () => {
    for (const url of ['/v1/writes', '/v1/writes/batch', '/v1/resources/r%2Fx/results?after=3', '/v1/a.b/.c/d..']) {
      expect(normalizePath(url)).toBe(url);
      expect(byUrl(url)).toBe(url);
    }
  });
});
