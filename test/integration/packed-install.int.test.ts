/**
 * The worker SDK installs alone: the packed `@leasehold/worker`, `@leasehold/sink-client` and
 * `@leasehold/protocol` tarballs go into an empty project OFFLINE (third-party packages from the
 * local pnpm store, ours from the tarballs only), with no native build, then import and type-check.
 * Packs the built packages as they are (the suite runs after the build; nothing is rebuilt here).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockfileEdges } from '../harness/lockfile-edges.js';

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
    `overrides:\n${SDK.map((pkg) => `  "@leasehold/${pkg}": "${tarball(pkg)}"\n`).join('')}${lockfileEdges(ROOT)}`,
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
    // @leasehold/fence-pg is an optional peer of the worker: a worker without PostgreSQL gets no pg.
    expect(packages.some((name) => name.startsWith('pg@') || name.startsWith('@leasehold+fence-pg'))).toBe(false);
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
  }, 180_000); // tsc over every installed declaration file (skipLibCheck off): slow on a loaded machine
});

/** Every published package, packed as `pnpm release:pack` does (built already: nothing rebuilt). */
const ALL = [
  'protocol',
  'telemetry',
  'daemon-kit',
  'sink-client',
  'client',
  'worker',
  'fence-pg',
  'sink',
  'coordinator',
  'cli',
] as const;

describe('the packed CLI: one install, four commands, a working cluster', () => {
  let cliDir: string;
  let cliProject: string;

  beforeAll(() => {
    cliDir = mkdtempSync(join(tmpdir(), 'leasehold-cli-pack-'));
    const release = join(cliDir, 'release');
    for (const pkg of ALL) run('pnpm', ['pack', '--pack-destination', release], join(ROOT, 'packages', pkg));
    cliProject = join(cliDir, 'ops');
    run('mkdir', ['-p', cliProject], cliDir);
    const tarball = (pkg: string) => `file:${join(release, `leasehold-${pkg}-0.1.0.tgz`)}`;
    writeFileSync(
      join(cliProject, 'package.json'),
      JSON.stringify({ name: 'ops', private: true, dependencies: { '@leasehold/cli': tarball('cli') } }),
    );
    writeFileSync(
      join(cliProject, 'pnpm-workspace.yaml'),
      `overrides:\n${ALL.map((pkg) => `  "@leasehold/${pkg}": "${tarball(pkg)}"\n`).join('')}` +
        lockfileEdges(ROOT) +
        // Offline, a fresh resolution must land on versions the local store holds: protobufjs
        // (etcd3's) depends on @types/node with an open range; pin the workspace's one.
        '  "@types/node": "20.19.43"\n' +
        // The sink's SQLite driver is the one native dependency (built from the local store);
        // protobufjs's script is a notice. What an operator's pnpm asks them to approve.
        'allowBuilds:\n  better-sqlite3: true\n  protobufjs: true\n',
    );
    run('pnpm', ['install', '--offline', '--reporter=silent'], cliProject);
  }, 300_000);

  afterAll(() => {
    rmSync(cliDir, { recursive: true, force: true });
  });

  it('puts leasehold, leasehold-coordinator, leasehold-sink and leasehold-worker on PATH; each answers --version and --help', () => {
    for (const bin of ['leasehold', 'leasehold-coordinator', 'leasehold-sink', 'leasehold-worker']) {
      const path = join(cliProject, 'node_modules', '.bin', bin);
      expect(run(path, ['--version'], cliProject).trim()).toMatch(new RegExp(`^${bin} \\d+\\.\\d+\\.\\d+$`));
      expect(run(path, ['--help'], cliProject)).toMatch(/usage|Usage|options|Options/);
    }
  });

  it('`leasehold cluster up --until-done` from the install runs the demo, stops in order, and logs no error', () => {
    const run = spawnSync(
      join(cliProject, 'node_modules', '.bin', 'leasehold'),
      ['cluster', 'up', '--until-done', '--tasks', '6', '--workers', '2', '--data-dir', join(cliDir, 'data')],
      {
        cwd: cliProject,
        encoding: 'utf8',
        timeout: 240_000,
        env: { PATH: process.env.PATH ?? '', NO_COLOR: '1', LEASEHOLD_DEMO_DURATION_MS: '50' },
      },
    );
    // The cluster's own lines go to stderr, the services' logs to stdout.
    const out = `${run.stderr}\n${run.stdout}`;
    expect(run.status, out).toBe(0);
    expect(out).toMatch(/demo complete: 6 tasks, each with exactly one result at the sink/);
    expect(out).toMatch(/stopping the cluster/);
    // A clean run stopped in dependency order (workers, coordinators, sink, etcd) leaves our
    // services nothing to warn about, from start to stop (etcd's own shutdown chatter aside). One
    // warning is about the machine, not the run: a heartbeat not answered within its interval
    // (the other integration files share the 2 cores; the worker then reconnects and resumes).
    const complaints = run.stdout
      .split('\n')
      .filter((l) => !l.startsWith('etcd') && /\b(WARN|ERROR|FATAL)\b|"level":(40|50|60)/.test(l))
      .filter((l) => !/WARN: heartbeat unanswered; reconnecting/.test(l));
    expect(complaints).toEqual([]);
  }, 300_000);
});
