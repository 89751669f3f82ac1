/**
 * Every deploy file parses, the Dockerfile is shaped as documented, and the drift check: every
 * `LEASEHOLD_*` variable and `--flag` in deploy/ (units, env examples, Dockerfile, compose,
 * Kubernetes, scripts, READMEs) and docs/deploy.md exists in the option table of the service it is
 * given to (the tables are imported from the packages), and no secret is given inline or as a
 * flag. Planted typos show each part of the check failing.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEPLOY_DIR,
  driftProblems,
  parseYamlDocuments,
  readDeployFiles,
  REPO_ROOT,
  SCHEMA_DIR,
  type DeployFile,
} from './deploy-files.js';

const files = readDeployFiles();
const dockerfile = readFileSync(join(DEPLOY_DIR, 'docker', 'Dockerfile'), 'utf8');

/** Dockerfile stages by name: the lines of each. */
function stages(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let current: string[] | undefined;
  for (const line of text.replace(/\\\n/g, ' ').split('\n')) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?/i.exec(line);
    if (from !== null) {
      current = [line];
      out.set(from[2] ?? from[1] ?? '', current);
    } else current?.push(line);
  }
  return out;
}

export function dockerfileProblems(text: string): string[] {
  const problems: string[] = [];
  const arg = /^ARG NODE_IMAGE=(\S+)$/m.exec(text)?.[1] ?? '';
  if (!/^node:20-bookworm-slim@sha256:([0-9a-f]{64}|<digest>)$/.test(arg))
    problems.push(`base image ${arg} is not pinned by digest`);
  const all = stages(text);
  for (const [name, lines] of all) {
    if (!/^FROM \$\{NODE_IMAGE\}|^FROM (runtime|build)\b/.test(lines[0] ?? ''))
      problems.push(`${name}: FROM is not the pinned base`);
  }
  const build = (all.get('build') ?? []).join('\n');
  if (!build.includes('pnpm install --frozen-lockfile')) problems.push('build: no pnpm install --frozen-lockfile');
  if (!build.includes('pnpm release:pack')) problems.push('build: does not install the release tarballs');
  const runtime = (all.get('runtime') ?? []).join('\n');
  const user = /^USER\s+(\S+)/m.exec(runtime)?.[1] ?? '';
  if (!/^[1-9][0-9]*(:[1-9][0-9]*)?$/.test(user))
    problems.push(`runtime: USER ${user || '(none)'} is not a numeric non-root user`);
  if (/\bcurl\b|\bwget\b/.test(text.replace(/^#.*$/gm, ''))) problems.push('curl/wget used');
  for (const target of ['sink', 'coordinator', 'worker']) {
    const lines = (all.get(target) ?? []).join('\n');
    if (lines === '') {
      problems.push(`no target ${target}`);
      continue;
    }
    if (!/^FROM runtime AS/m.test(lines)) problems.push(`${target}: not built on the runtime stage`);
    if (!new RegExp(`^ENTRYPOINT \\["leasehold-${target}"\\]$`, 'm').test(lines))
      problems.push(`${target}: ENTRYPOINT is not leasehold-${target}`);
    if (/^USER\s+(root|0)\b/m.test(lines)) problems.push(`${target}: runs as root`);
    if (target !== 'worker' && !/^HEALTHCHECK .*CMD \["node", "-e", ".*\/healthz/m.test(lines))
      problems.push(`${target}: no node HEALTHCHECK on /healthz`);
  }
  if (!/^VOLUME \["\/var\/lib\/leasehold"\]$/m.test((all.get('sink') ?? []).join('\n')))
    problems.push('sink: state is not a volume');
  return problems;
}

describe('deploy files', () => {
  it('every YAML and JSON file parses (deploy/, the vendored schemas)', () => {
    const structured = files.filter((f) => /\.(ya?ml|json)$/.test(f.path));
    expect(structured.map((f) => f.path)).toEqual(
      expect.arrayContaining(['deploy/compose.yaml', 'deploy/k8s/kustomization.yaml']),
    );
    for (const f of structured) {
      if (f.path.endsWith('.json')) JSON.parse(f.text);
      else expect(parseYamlDocuments(f).length, f.path).toBeGreaterThan(0);
    }
    for (const name of ['kubernetes.json', 'compose-spec.json', 'versions.json'])
      JSON.parse(readFileSync(join(SCHEMA_DIR, name), 'utf8'));
  });

  it('a YAML syntax error is reported', () => {
    expect(() => parseYamlDocuments({ path: 'x.yaml', text: 'a: [1, 2\nb: c\n' })).toThrow(/x\.yaml/);
  });

  it('the Dockerfile has a target per service on a digest-pinned base, non-root, with healthchecks', () => {
    expect(dockerfileProblems(dockerfile)).toEqual([]);
  });

  it.each([
    [
      'a floating base tag',
      (t: string) => t.replace(/^ARG NODE_IMAGE=.*$/m, 'ARG NODE_IMAGE=node:20-bookworm-slim'),
      /not pinned by digest/,
    ],
    ['a root user', (t: string) => t.replace('USER 10001:10001', 'USER root'), /not a numeric non-root user/],
    [
      'no healthcheck',
      (t: string) => t.replace(/^HEALTHCHECK [^\n]*\\\n[^\n]*LEASEHOLD_SINK[^\n]*\n/m, ''),
      /sink: no node HEALTHCHECK/,
    ],
    ['no lockfile', (t: string) => t.replace('--frozen-lockfile', ''), /frozen-lockfile/],
    ['curl', (t: string) => t.replace('python3 make g++', 'python3 make g++ curl'), /curl/],
  ])('the Dockerfile check reports %s', (_what, plant, problem) => {
    expect(dockerfileProblems(plant(dockerfile)).join('\n')).toMatch(problem);
  });

  it('.dockerignore keeps dependencies, builds and generated secrets out of the build context', () => {
    const ignore = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8').split('\n');
    for (const entry of ['**/node_modules', '**/dist', 'deploy/secrets', 'deploy/k8s/secrets', '.git'])
      expect(ignore).toContain(entry);
  });
});

describe('drift: deploy files against the option tables', () => {
  it('reads the deploy files of every kind', () => {
    const paths = files.map((f) => f.path);
    for (const p of [
      'deploy/systemd/leasehold-sink.service',
      'deploy/env/sink.env.example',
      'deploy/docker/Dockerfile',
      'deploy/compose.yaml',
      'deploy/k8s/coordinator.yaml',
      'docs/deploy.md',
    ]) {
      expect(paths).toContain(p);
    }
  });

  it('every LEASEHOLD_* variable and --flag used exists for its service; no secret inline or as a flag', () => {
    expect(driftProblems(files)).toEqual([]);
  });

  const plant = (path: string, edit: (t: string) => string): DeployFile[] =>
    files.map((f) => (f.path === path ? { path, text: edit(f.text) } : f));
  it.each([
    [
      'a variable typo in compose',
      'deploy/compose.yaml',
      (t: string) => t.replace('LEASEHOLD_SINK_COORDINATOR_KEYS_FILE', 'LEASEHOLD_SINK_COORDINATOR_KEY_FILE'),
      /LEASEHOLD_SINK_COORDINATOR_KEY_FILE: no such sink option/,
    ],
    [
      'a variable typo in a manifest',
      'deploy/k8s/coordinator.yaml',
      (t: string) => t.replace('LEASEHOLD_COORDINATOR_SINK_URL', 'LEASEHOLD_COORDINATOR_SINK_ULR'),
      /SINK_ULR: no such coordinator option/,
    ],
    [
      'a variable typo in an env example',
      'deploy/env/worker.env.example',
      (t: string) => t.replace('LEASEHOLD_WORKER_CONCURRENCY', 'LEASEHOLD_WORKER_CONCURENCY'),
      /CONCURENCY/,
    ],
    [
      'a variable typo in the Dockerfile',
      'deploy/docker/Dockerfile',
      (t: string) => t.replace('LEASEHOLD_SINK_DB_PATH', 'LEASEHOLD_SINK_DBPATH'),
      /DBPATH/,
    ],
    [
      'a variable typo in the docs',
      'docs/deploy.md',
      (t: string) => t.replace('LEASEHOLD_SINK_DATABASE_URL_FILE', 'LEASEHOLD_SINK_DATABASE_URI_FILE'),
      /DATABASE_URI_FILE/,
    ],
    [
      'a _FILE of an option not read from files',
      'deploy/compose.yaml',
      (t: string) => t.replace('LEASEHOLD_SINK_TLS_CERT:', 'LEASEHOLD_SINK_TLS_CERT_FILE:'),
      /is not read from a file/,
    ],
    [
      'another service option on a container',
      'deploy/k8s/sink.yaml',
      (t: string) => t.replace('LEASEHOLD_SINK_PORT', 'LEASEHOLD_COORDINATOR_PORT'),
      /is a coordinator option, set on a sink/,
    ],
    [
      'an unknown prefix',
      'deploy/compose.yaml',
      (t: string) => t.replace('LEASEHOLD_WORKER_HANDLER', 'LEASEHOLD_WORKERS_HANDLER'),
      /LEASEHOLD_WORKERS_HANDLER: no such cli option/,
    ],
    [
      'a flag typo in the etcd-rbac job',
      'deploy/compose.yaml',
      (t: string) => t.replace('--coordinator-users=', '--coordinator-user='),
      /leasehold has no flag --coordinator-user/,
    ],
    [
      'a flag typo in a leasehold etcd-rbac command in the docs',
      'docs/deploy.md',
      (t: string) => `${t}\n    leasehold etcd-rbac --etcd-endpoint https://etcd:2379\n`,
      /leasehold has no flag --etcd-endpoint/,
    ],
    [
      'a flag typo in a manifest',
      'deploy/k8s/sink.yaml',
      (t: string) =>
        t.replace(
          '        - name: sink\n          image: leasehold-sink\n',
          '        - name: sink\n          image: leasehold-sink\n          args: [--log-levl, debug]\n',
        ),
      /leasehold-sink has no flag --log-levl/,
    ],
    [
      'a flag typo in compose',
      'deploy/compose.yaml',
      (t: string) =>
        t.replace(
          '    image: leasehold-sink:local\n',
          '    image: leasehold-sink:local\n    command: [--stor, postgres]\n',
        ),
      /no flag --stor/,
    ],
    [
      'a flag typo in the docs',
      'docs/deploy.md',
      (t: string) => `${t}\n    leasehold-coordinator --sesion-ttl-ms 5000\n`,
      /leasehold-coordinator has no flag --sesion-ttl-ms/,
    ],
    [
      'a secret as a flag',
      'docs/deploy.md',
      (t: string) => `${t}\n    leasehold-sink --coordinator-keys abc\n`,
      /secrets are never flags/,
    ],
    [
      'a secret inline in an env file',
      'deploy/env/sink.env.example',
      (t: string) => `${t}LEASEHOLD_SINK_COORDINATOR_KEYS=abcdefghijklmnopqrstuvwx\n`,
      /gives a secret inline/,
    ],
  ])('reports %s', (_what, path, edit, problem) => {
    expect(driftProblems(plant(path, edit)).join('\n')).toMatch(problem);
  });
});
