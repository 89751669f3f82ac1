/**
 * No import circles in the repo's TypeScript (packages, tests, benches, scripts), type-only and
 * dynamic imports included: see import-graph.ts. A failure names each circle.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildImportGraph, findImportCircles } from './import-graph.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('import circles', () => {
  it('finds a circle through type-only and dynamic imports (the check itself)', () => {
    const graph = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts', 'd.ts']],
      ['d.ts', []],
      ['e.ts', ['e.ts']],
    ]);
    expect(findImportCircles(graph)).toEqual([
      ['a.ts', 'b.ts', 'c.ts', 'a.ts'],
      ['e.ts', 'e.ts'],
    ]);
    expect(
      findImportCircles(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('the sources have none', () => {
    const graph = buildImportGraph(root, ['packages', 'test', 'bench', 'scripts']);
    expect(graph.size).toBeGreaterThan(100); // the walk found the sources
    expect(findImportCircles(graph).map((c) => c.join(' → '))).toEqual([]);
  });
});
