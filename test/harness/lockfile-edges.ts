/** pnpm overrides that hold an offline install of packed tarballs to the workspace's resolutions. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The workspace lockfile's resolution of every third-party dependency edge (`parent@version>dep`:
 * `version`, from its `snapshots`), as pnpm overrides. An offline install resolves afresh from the
 * local metadata cache, which knows versions published after the lockfile was written (whose
 * tarballs the store lacks: string_decoder 1.4.0 in 2026-11 broke this test on a new machine); with
 * these, every third-party package lands on the version the workspace installed from the same store.
 * Used by every test that installs packed tarballs offline into a project of its own.
 */
export function lockfileEdges(root: string): string {
  const text = readFileSync(join(root, 'pnpm-lock.yaml'), 'utf8');
  // pnpm 12 writes its own environment first; the project's lockfile is the last document.
  const project = text.slice(text.lastIndexOf('\n---\n') + 1);
  const snapshots = project.slice(project.indexOf('\nsnapshots:\n'));
  const unquote = (v: string) => v.trim().replace(/^'(.*)'$/, '$1');
  const bare = (v: string) => v.replace(/\(.*$/, '');
  const edges = new Map<string, string>();
  let parent: string | undefined;
  let inDeps = false;
  for (const line of snapshots.split('\n')) {
    const entry = /^ {2}(\S.*):(?: \{\})?$/.exec(line);
    if (entry?.[1] !== undefined) {
      parent = bare(unquote(entry[1]));
      inDeps = false;
      continue;
    }
    const section = /^ {4}(\w+):$/.exec(line);
    if (section !== null) {
      inDeps = section[1] === 'dependencies' || section[1] === 'optionalDependencies';
      continue;
    }
    const dep = /^ {6}('[^']+'|[^:\s]+): (.+)$/.exec(line);
    if (parent === undefined || !inDeps || dep?.[1] === undefined || dep[2] === undefined) continue;
    const version = bare(unquote(dep[2]));
    // Aliases (`name@version`) and links stay as they resolve.
    if (/^\d/.test(version)) edges.set(`${parent}>${unquote(dep[1])}`, version);
  }
  return [...edges].map(([edge, version]) => `  "${edge}": "${version}"\n`).join('');
}
