/** The committed JSON Schemas (packages/protocol/schemas) must match the zod schemas: no drift. */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { generateJsonSchemas } from './json-schemas.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'schemas');

describe('generated JSON Schemas', () => {
  const generated = generateJsonSchemas();

  it.each(Object.keys(generated))(
    'schemas/%s.json is up to date (run `pnpm schemas` after changing a message)',
    (name) => {
      expect(readFileSync(join(dir, `${name}.json`), 'utf8')).toBe(generated[name]);
    },
  );

  it('has no stale schema files', () => {
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((f) => f.slice(0, -5));
    expect(files.sort()).toEqual(Object.keys(generated).sort());
  });
});
