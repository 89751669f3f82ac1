/**
 * Shipped code knows nothing of sabotage: no file of any package outside its tests (sources, UI,
 * package.json, README — what the tarballs are built from) contains the word, in any case. The
 * sabotage runs live in test/chaos/sabotage/, test entry points that start the real daemons with a
 * lying collaborator through ordinary dependency-injection seams. Fast: reads files, no cluster.
 * The built tarballs are checked too (test-fakes.ts, test/integration/packed-fakes.int.test.ts).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../harness/service.js';

const SKIPPED_DIRS = new Set(['node_modules', 'dist', 'coverage']);
const TEXT = /\.(ts|tsx|js|mjs|cjs|json|md|html|css)$/;
const TEST_FILE = /\.test\.[cm]?[jt]sx?$/;

/** Every shipped text file of packages/ (tests and build output left out), repo-relative. */
function shippedFiles(dir = join(REPO_ROOT, 'packages'), out: string[] = []): string[] {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIPPED_DIRS.has(entry.name)) shippedFiles(full, out);
    } else if (TEXT.test(entry.name) && !TEST_FILE.test(entry.name)) {
      out.push(relative(REPO_ROOT, full));
    }
  }
  return out;
}

/** The files whose text mentions sabotage, with the first line that does. */
function mentionsOfSabotage(files: readonly { path: string; text: string }[]): string[] {
  const found: string[] = [];
  for (const { path, text } of files) {
    const line = text.split('\n').findIndex((l) => /sabotage/i.test(l));
    if (line >= 0) found.push(`${path}:${line + 1}`);
  }
  return found;
}

describe('shipped sources', () => {
  const files = shippedFiles().map((path) => ({ path, text: readFileSync(join(REPO_ROOT, path), 'utf8') }));

  it('are read (the scan sees the daemons and their configs)', () => {
    const paths = files.map((f) => f.path);
    for (const p of [
      'packages/sink/src/core/batch.ts',
      'packages/sink/src/config.ts',
      'packages/coordinator/src/service/grant-delivery.ts',
      'packages/coordinator/src/config.ts',
      'packages/daemon-kit/src/daemon-options.ts',
    ])
      expect(paths).toContain(p);
    expect(paths.filter((p) => TEST_FILE.test(p))).toEqual([]);
  });

  it('never mention sabotage (case-insensitive)', () => {
    expect(mentionsOfSabotage(files)).toEqual([]);
  });

  it('would catch a planted mention (the scanner itself)', () => {
    expect(
      mentionsOfSabotage([
        { path: 'a.ts', text: 'const ok = 1;\n// TEST SABOTAGE ACTIVE\n' },
        { path: 'b.ts', text: "if (config.testSabotage === 'skip-fence') {}" },
        { path: 'c.ts', text: 'export const fenced = true;' },
      ]),
    ).toEqual(['a.ts:2', 'b.ts:1']);
  });
});
