/** Writes packages/protocol/schemas/*.json from the zod schemas. Run: `pnpm schemas` (after build). */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateJsonSchemas } from '../json-schemas.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'schemas');
mkdirSync(dir, { recursive: true });
for (const [name, text] of Object.entries(generateJsonSchemas())) {
  writeFileSync(join(dir, `${name}.json`), text);
  console.log(`wrote schemas/${name}.json`);
}
