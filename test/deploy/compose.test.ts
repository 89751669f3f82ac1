/**
 * deploy/compose.yaml without a Docker engine: valid against the vendored Compose Specification
 * schema (after YAML merge keys), the topology the deployment needs (3 etcd members, 2 sinks on
 * PostgreSQL, 2 coordinators, 3 workers), healthchecks with service_healthy dependencies, our
 * containers hardened, and every secret a Compose secret file read through a `*_FILE` option.
 * Each check is shown to fail on a planted copy.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEPLOY_DIR, envEntries, parseYamlDocuments, resolveEnvName, serviceOf, text } from './deploy-files.js';
import { composeProblems } from './schemas.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const source = readFileSync(join(DEPLOY_DIR, 'compose.yaml'), 'utf8');
const parse = (t: string): Obj => {
  const doc = parseYamlDocuments({ path: 'deploy/compose.yaml', text: t })[0];
  return isObj(doc) ? doc : {};
};

/** Secrets of a service: [source, target file name]. */
function serviceSecrets(svc: Obj): [string, string][] {
  return (Array.isArray(svc.secrets) ? svc.secrets : []).map((s): [string, string] =>
    isObj(s) ? [text(s.source), text(s.target) || text(s.source)] : [text(s), text(s)],
  );
}

/** The policy of the compose file: every problem. */
export function composeFileProblems(doc: Obj): string[] {
  const problems: string[] = [];
  const services = isObj(doc.services) ? doc.services : {};
  const topSecrets = isObj(doc.secrets) ? doc.secrets : {};
  const count = (pred: (name: string, svc: Obj) => boolean) =>
    Object.entries(services).reduce((n, [name, svc]) => {
      if (!isObj(svc) || !pred(name, svc)) return n;
      return n + Number(at(svc, 'deploy', 'replicas') ?? 1);
    }, 0);
  const ours = (svc: Obj) => serviceOf(`${text(svc.image)} ${text(at(svc, 'build', 'target'))}`);
  const env = (svc: Obj) => Object.fromEntries(envEntries(svc.environment));
  if (count((n) => /^etcd-\d$/.test(n)) !== 3) problems.push('not 3 etcd members');
  if (count((_n, s) => ours(s) === 'sink' && env(s).LEASEHOLD_SINK_STORE === 'postgres') !== 2)
    problems.push('not 2 sinks on PostgreSQL');
  if (count((_n, s) => ours(s) === 'coordinator') !== 2) problems.push('not 2 coordinators');
  if (count((_n, s) => ours(s) === 'worker') !== 3) problems.push('not 3 workers');

  for (const [name, svc] of Object.entries(services)) {
    if (!isObj(svc)) continue;
    // Dependencies wait for health, and what they wait on has a healthcheck.
    const deps = isObj(svc.depends_on) ? svc.depends_on : {};
    if (Array.isArray(svc.depends_on)) problems.push(`${name}: depends_on without conditions`);
    for (const [dep, how] of Object.entries(deps)) {
      if (at(how, 'condition') !== 'service_healthy')
        problems.push(`${name}: depends on ${dep} without service_healthy`);
      if (at(services, dep, 'healthcheck', 'test') === undefined)
        problems.push(`${name}: depends on ${dep}, which has no healthcheck`);
    }
    const service = ours(svc);
    if (service === undefined) continue;
    if (svc.read_only !== true) problems.push(`${name}: root filesystem not read_only`);
    if (!/^[1-9][0-9]*(:[0-9]+)?$/.test(text(svc.user))) problems.push(`${name}: not a numeric non-root user`);
    if (!Array.isArray(svc.cap_drop) || !svc.cap_drop.includes('ALL')) problems.push(`${name}: cap_drop is not ALL`);
    if (service !== 'worker' && at(svc, 'healthcheck', 'test') === undefined) problems.push(`${name}: no healthcheck`);
    if (service !== 'worker' && !JSON.stringify(at(svc, 'healthcheck', 'test')).includes('/healthz')) {
      problems.push(`${name}: healthcheck is not /healthz`);
    }
    const secrets = serviceSecrets(svc);
    for (const [src] of secrets)
      if (!isObj(topSecrets[src]) || typeof topSecrets[src].file !== 'string')
        problems.push(`${name}: secret ${src} is not a file secret`);
    for (const [envName, value] of envEntries(svc.environment)) {
      const r = resolveEnvName(envName);
      if (!('service' in r)) continue;
      const secretPath = r.file || r.option === 'tls-key';
      if (!secretPath) {
        if (r.service.options[r.option]?.secret === true) problems.push(`${name}: ${envName} is a secret given inline`);
        continue;
      }
      const file = /^\/run\/secrets\/([^/]+)$/.exec(value ?? '')?.[1];
      if (file === undefined || !secrets.some(([, target]) => target === file)) {
        problems.push(`${name}: ${envName}=${value ?? ''} is not one of its secrets (/run/secrets/<name>)`);
      }
    }
  }
  return problems;
}

function at(v: unknown, ...path: string[]): unknown {
  return path.reduce<unknown>((o, k) => (isObj(o) ? o[k] : undefined), v);
}

describe('deploy/compose.yaml', () => {
  it('is valid against the Compose Specification schema', () => {
    expect(composeProblems(parse(source))).toEqual([]);
  });

  it('follows the policy (topology, health, hardening, secrets as files)', () => {
    expect(composeFileProblems(parse(source))).toEqual([]);
  });

  it.each([
    [
      'a misspelt condition',
      (t: string) => t.replace('postgres: { condition: service_healthy }', 'postgres: { condition: service_healty }'),
      /condition/,
    ],
    ['an unknown service key', (t: string) => t.replace('    shm_size: 256m', '    shm_sise: 256m'), /shm_sise/],
    ['a wrong type', (t: string) => t.replace('read_only: true', 'read_only: [yes]'), /read_only/],
  ])('the schema rejects %s', (_what, plant, problem) => {
    expect(composeProblems(parse(plant(source))).join('\n')).toMatch(problem);
  });

  it.each([
    ['one etcd member less', (t: string) => t.replace(/ {2}etcd-3:\n(?: {4}.*\n)+/, ''), /not 3 etcd members/],
    [
      'a sink on SQLite',
      (t: string) => t.replace('LEASEHOLD_SINK_STORE: postgres', 'LEASEHOLD_SINK_STORE: sqlite'),
      /not 2 sinks on PostgreSQL/,
    ],
    [
      'a dependency not waiting for health',
      (t: string) => t.replace('postgres: { condition: service_healthy }', 'postgres: { condition: service_started }'),
      /without service_healthy/,
    ],
    [
      'a writable root filesystem',
      (t: string) => t.replace('  read_only: true\n  cap_drop', '  read_only: false\n  cap_drop'),
      /not read_only/,
    ],
    [
      'a secret inline',
      (t: string) =>
        t.replace(
          'LEASEHOLD_COORDINATOR_ADMIN_KEYS_FILE: /run/secrets/admin-keys',
          'LEASEHOLD_COORDINATOR_ADMIN_KEYS: abcdefghijklmnopqrstuvwx',
        ),
      /given inline/,
    ],
    [
      'a _FILE of a secret not given to the service',
      (t: string) =>
        t.replace(
          'secrets: [sink.crt, sink.key, sink-key, capability-keys, database-url]',
          'secrets: [sink.crt, sink.key, sink-key, capability-keys]',
        ),
      /database-url is not one of its secrets/,
    ],
  ])('the policy reports %s', (_what, plant, problem) => {
    expect(composeFileProblems(parse(plant(source))).join('\n')).toMatch(problem);
  });
});
