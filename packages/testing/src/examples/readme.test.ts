/** The README's example is the example this suite runs: the two cannot drift apart. */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';

const read = (name: string) => readFileSync(new URL(name, import.meta.url), 'utf8');

it('the README shows stale-write.test.ts unchanged', () => {
  const readme = read('../../README.md');
  const block = /```ts\n([\s\S]*?)```/.exec(readme)?.[1];
  expect(block).toBe(read('./stale-write.test.ts'));
});
