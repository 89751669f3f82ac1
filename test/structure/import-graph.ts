/**
 * The import graph of the repo's TypeScript sources, for the import-circle check: every
 * `import`/`export … from`, `import type`, dynamic `import()` and `require()` (TypeScript's own
 * `preProcessFile` finds them, comments and strings excluded), resolved to a file when it is
 * relative (`./x.js` → `./x.ts`, `./dir` → `./dir/index.ts`) or names a workspace package
 * (`@leasehold/x[/sub]` → its `leasehold-source` export). Other packages are leaves.
 *
 * ESLint's `import-x/no-cycle` skips type-only and dynamic imports; a circle through them still
 * ties two modules together (one cannot be read, moved or split without the other), so they count.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

export type ImportGraph = ReadonlyMap<string, readonly string[]>;

const SOURCE = /\.tsx?$/;
const SKIP_DIRS = new Set(['node_modules', 'dist', '.stryker-tmp', 'coverage']);

function sourceFiles(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name)) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) sourceFiles(path, out);
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** `@leasehold/x` and `@leasehold/x/sub` → the source file of that export (leasehold-source). */
function workspaceExports(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const pkg of readdirSync(join(root, 'packages'))) {
    const file = join(root, 'packages', pkg, 'package.json');
    if (!existsSync(file)) continue;
    const json = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; exports?: Record<string, unknown> };
    for (const [sub, target] of Object.entries(json.exports ?? {})) {
      const source = (target as { 'leasehold-source'?: unknown } | null)?.['leasehold-source'];
      if (typeof source !== 'string' || json.name === undefined) continue;
      out.set(sub === '.' ? json.name : `${json.name}${sub.slice(1)}`, resolve(dirname(file), source));
    }
  }
  return out;
}

function resolveRelative(from: string, specifier: string): string | undefined {
  const base = resolve(dirname(from), specifier);
  const stem = base.replace(/\.(m?js|jsx)$/, '');
  const candidates = [base, `${stem}.ts`, `${stem}.tsx`, join(base, 'index.ts'), join(base, 'index.tsx')];
  return candidates.find((c) => SOURCE.test(c) && existsSync(c));
}

/** The graph over the sources under `dirs` (relative to `root`); node names are paths relative to `root`. */
export function buildImportGraph(root: string, dirs: readonly string[]): ImportGraph {
  const exports = workspaceExports(root);
  const graph = new Map<string, string[]>();
  for (const file of dirs.flatMap((d) => sourceFiles(join(root, d)))) {
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    const targets = new Set<string>();
    for (const { fileName } of info.importedFiles) {
      const target = fileName.startsWith('.') ? resolveRelative(file, fileName) : exports.get(fileName);
      if (target !== undefined) targets.add(relative(root, target));
    }
    graph.set(relative(root, file), [...targets].sort());
  }
  return graph;
}

/**
 * The circles a depth-first search closes (each back edge gives one, rotated to start at its
 * smallest node, listed once): `[a, b, a]` means a imports b and b imports a. Not every elementary
 * circle of a tangle is listed, but a graph with any circle yields at least one: none means none.
 */
export function findImportCircles(graph: ImportGraph): string[][] {
  const circles = new Map<string, string[]>();
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): void => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      const seen = state.get(next);
      if (seen === 'open') {
        const circle = stack.slice(stack.indexOf(next));
        const start = circle.indexOf([...circle].sort()[0] ?? next);
        const rotated = [...circle.slice(start), ...circle.slice(0, start)];
        circles.set(rotated.join(' → '), [...rotated, rotated[0] ?? next]);
      } else if (seen === undefined) {
        visit(next);
      }
    }
    stack.pop();
    state.set(node, 'done');
  };
  for (const node of [...graph.keys()].sort()) if (!state.has(node)) visit(node);
  return [...circles.values()];
}
