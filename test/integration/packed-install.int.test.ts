/**
 * The worker SDK installs alone: the packed `@leasehold/worker`, `@leasehold/sink-client` and
 * `@leasehold/protocol` tarballs go into an empty project OFFLINE (third-party packages from the
 * local pnpm store, ours from the tarballs only), with no native build, then import and type-check.
 * Packs the built packages as they are (the suite runs after the build; nothing is rebuilt here).
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = resolve(fileURLToPath(new URL('.', import.meta.url)), '..', '..');
const SDK = ['protocol', 'sink-client', 'worker'] as const;
let dir: string;
let project: string;

function run(cmd: string, args: string[], cwd: string): string {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
  }
}

/** Bytes on disk, symlinks not followed (pnpm links each package from its store directory). */
function sizeOf(path: string): number {
  const st = lstatSync(path);
  if (st.isSymbolicLink()) return 0;
  if (!st.isDirectory()) return st.size;
  return readdirSync(path).reduce((sum, name) => sum + sizeOf(join(path, name)), 0);
}

function files(path: string, match: (name: string) => boolean, out: string[] = []): string[] {
  for (const name of readdirSync(path)) {
    const full = join(path, name);
    const st = lstatSync(full);
    if (st.isSymbolicLink()) continue;
    if (st.isDirectory()) files(full, match, out);
    else if (match(name)) out.push(full);
  }
  return out;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-pack-'));
  const release = join(dir, 'release');
  for (const pkg of SDK) run('pnpm', ['pack', '--pack-destination', release], join(ROOT, 'packages', pkg));
  project = join(dir, 'app');
  const tarball = (pkg: string) => `file:${join(release, `leasehold-${pkg}-0.1.0.tgz`)}`;
  const deps = Object.fromEntries(SDK.map((pkg) => [`@leasehold/${pkg}`, tarball(pkg)]));
  run('mkdir', ['-p', project], dir);
  // A Node project has Node's types (the SDK's declarations use Buffer, as pino's do).
  const devDependencies = { '@types/node': '20.19.43', typescript: '5.9.3' };
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'app', private: true, type: 'module', dependencies: deps, devDependencies }),
  );
  // Our packages' own dependencies on each other resolve to the tarballs, never a registry.
  writeFileSync(
    join(project, 'pnpm-workspace.yaml'),
    `overrides:\n${SDK.map((pkg) => `  "@leasehold/${pkg}": "${tarball(pkg)}"\n`).join('')}`,
  );
}, 120_000);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the packed worker SDK', () => {
  it('installs offline into an empty project with no native build and a small tree', () => {
    run('pnpm', ['install', '--offline', '--reporter=silent'], project);
    const store = join(project, 'node_modules', '.pnpm');
    const dev = /^(typescript|@types\+node|undici-types)@/;
    const packages = readdirSync(store).filter(
      (name) => name !== 'lock.yaml' && name !== 'node_modules' && !dev.test(name),
    );
    expect(packages.some((name) => name.startsWith('better-sqlite3'))).toBe(false);
    expect(packages.some((name) => name.startsWith('fastify'))).toBe(false);
    expect(packages.some((name) => name.startsWith('etcd3'))).toBe(false);
    expect(files(store, (name) => name.endsWith('.node') || name === 'binding.gyp')).toEqual([]);
    expect(packages.length).toBeLessThan(30);
    const bytes = packages.reduce((sum, name) => sum + sizeOf(join(store, name)), 0);
    expect(bytes).toBeLessThan(20 * 1024 * 1024);
  });

  it('imports and type-checks against the installed types', () => {
    writeFileSync(
      join(project, 'index.ts'),
      [
        "import { Worker, WorkerState, type TaskHandler } from '@leasehold/worker';",
        "import { SinkClient } from '@leasehold/sink-client';",
        "import { parseToken, formatToken } from '@leasehold/protocol';",
        'const handler: TaskHandler = async (task, ctx) => ({ taskId: task.taskId, token: formatToken(ctx.token) });',
        "const worker = new Worker({ coordinators: ['ws://127.0.0.1:1'], sink: new SinkClient({ url: 'http://127.0.0.1:1' }), credentials: { workerKey: 'k' }, handler });",
        "const state: string = worker.state === WorkerState.CREATED ? 'created' : 'other';",
        "export const token: bigint = parseToken('42');",
        'export { state };',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'ES2022',
          noEmit: true,
          skipLibCheck: false,
          types: [],
        },
        files: ['index.ts'],
      }),
    );
    run(join(project, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], project);
    const out = run(
      'node',
      [
        '--input-type=module',
        '-e',
        "const w = await import('@leasehold/worker'); console.log(typeof w.Worker, typeof w.startWorker);",
      ],
      project,
    );
    expect(out.trim()).toBe('function function');
  });
});
