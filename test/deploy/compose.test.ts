/**
 * deploy/compose.yaml without a Docker engine: valid against the vendored Compose Specification
 * schema (after YAML merge keys), the topology the deployment needs (3 etcd members, 2 sinks on
 * PostgreSQL, 2 coordinators, 3 workers), healthchecks with service_healthy dependencies, our
 * containers hardened, every secret a Compose secret file read through a `*_FILE` option, and
 * every etcd member with leasehold's backend quota and auto-compaction (etcd-space.ts).
 * Each check is shown to fail on a planted copy.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEPLOY_DIR,
  envEntries,
  isCliJob,
  parseYamlDocuments,
  resolveEnvName,
  serviceOf,
  text,
} from './deploy-files.js';
import { etcdSpaceProblems, flagOfEnv } from './etcd-space.js';
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

const argv = (v: unknown): string[] =>
  Array.isArray(v) ? v.map(String) : typeof v === 'string' ? v.split(/\s+/).filter(Boolean) : [];
/** A one-shot job running the `leasehold` command (the etcd-rbac setup). */
const isJob = (svc: unknown): boolean => isObj(svc) && isCliJob(argv(svc.entrypoint));

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
  if (count((_n, s) => ours(s) === 'coordinator' && !isJob(s)) !== 2) problems.push('not 2 coordinators');
  if (count((_n, s) => ours(s) === 'worker') !== 3) problems.push('not 3 workers');

  for (const [name, svc] of Object.entries(services)) {
    if (!isObj(svc)) continue;
    // Dependencies wait for health, and what they wait on has a healthcheck.
    const deps = isObj(svc.depends_on) ? svc.depends_on : {};
    if (Array.isArray(svc.depends_on)) problems.push(`${name}: depends_on without conditions`);
    for (const [dep, how] of Object.entries(deps)) {
      // A one-shot job is waited for until it exited 0; a daemon until it is healthy.
      if (isJob(services[dep])) {
        if (at(how, 'condition') !== 'service_completed_successfully')
          problems.push(`${name}: depends on the job ${dep} without service_completed_successfully`);
        continue;
      }
      if (at(how, 'condition') !== 'service_healthy')
        problems.push(`${name}: depends on ${dep} without service_healthy`);
      if (at(services, dep, 'healthcheck', 'test') === undefined)
        problems.push(`${name}: depends on ${dep}, which has no healthcheck`);
    }
    const secretNames = serviceSecrets(svc).map(([src]) => src);
    // etcd: clients over TLS with a certificate of etcd's own CA required (the user is its CN).
    if (/^etcd-\d$/.test(name)) {
      const e = env(svc);
      if (!text(e.ETCD_LISTEN_CLIENT_URLS).startsWith('https://')) problems.push(`${name}: clients not over TLS`);
      if (e.ETCD_CLIENT_CERT_AUTH !== 'true') problems.push(`${name}: client certificates not required`);
      if (e.ETCD_TRUSTED_CA_FILE !== '/run/secrets/etcd-ca.crt')
        problems.push(`${name}: trusts another CA than etcd's`);
      const settings = new Map<string, string>();
      for (const [k, v] of Object.entries(e)) {
        const flag = flagOfEnv(k);
        if (flag !== undefined && v !== undefined) settings.set(flag, v);
      }
      problems.push(...etcdSpaceProblems(name, settings));
    }
    const service = ours(svc);
    if (service === undefined) continue;
    // Least privilege: the sink has no etcd identity; each coordinator waits for etcd's RBAC.
    if (service === 'sink' && secretNames.some((n) => n.includes('etcd')))
      problems.push(`${name}: the sink is given etcd secrets`);
    if (service === 'coordinator' && !isJob(svc)) {
      const setup = Object.keys(deps).find(
        (d) => isJob(services[d]) && argv(at(services, d, 'entrypoint')).includes('etcd-rbac'),
      );
      if (setup === undefined) problems.push(`${name}: does not wait for the etcd-rbac job`);
    }
    if (svc.read_only !== true) problems.push(`${name}: root filesystem not read_only`);
    if (!/^[1-9][0-9]*(:[0-9]+)?$/.test(text(svc.user))) problems.push(`${name}: not a numeric non-root user`);
    if (!Array.isArray(svc.cap_drop) || !svc.cap_drop.includes('ALL')) problems.push(`${name}: cap_drop is not ALL`);
    const daemon = service !== 'worker' && !isJob(svc);
    if (daemon && at(svc, 'healthcheck', 'test') === undefined) problems.push(`${name}: no healthcheck`);
    if (daemon && !JSON.stringify(at(svc, 'healthcheck', 'test')).includes('/healthz')) {
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
          'secrets: [sink.crt, sink.key, sink-key, capability-public-keys, database-url]',
          'secrets: [sink.crt, sink.key, sink-key, capability-public-keys]',
        ),
      /database-url is not one of its secrets/,
    ],
    [
      'etcd without client certificates',
      (t: string) => t.replace("ETCD_CLIENT_CERT_AUTH: 'true'", "ETCD_CLIENT_CERT_AUTH: 'false'"),
      /etcd-1: client certificates not required/,
    ],
    [
      'etcd trusting the services CA',
      (t: string) =>
        t.replace('ETCD_TRUSTED_CA_FILE: /run/secrets/etcd-ca.crt', 'ETCD_TRUSTED_CA_FILE: /run/secrets/ca.crt'),
      /trusts another CA than etcd's/,
    ],
    [
      'etcd compacting by revision count',
      (t: string) => t.replace('ETCD_AUTO_COMPACTION_MODE: periodic', 'ETCD_AUTO_COMPACTION_MODE: revision'),
      /etcd-1: etcd --auto-compaction-mode is revision, expected periodic/,
    ],
    [
      'etcd without a stated quota',
      (t: string) => t.replace("  ETCD_QUOTA_BACKEND_BYTES: '2147483648'\n", ''),
      /etcd-3: etcd without --quota-backend-bytes/,
    ],
    [
      'the sink given an etcd identity',
      (t: string) =>
        t.replace(
          'secrets: [sink.crt, sink.key, sink-key, capability-public-keys, database-url]',
          'secrets: [sink.crt, sink.key, sink-key, capability-public-keys, database-url, coordinator-a-etcd.key]',
        ),
      /the sink is given etcd secrets/,
    ],
    [
      'a coordinator not waiting for the RBAC job',
      (t: string) => t.replace('    etcd-rbac: { condition: service_completed_successfully }\n', ''),
      /coordinator-a: does not wait for the etcd-rbac job/,
    ],
    [
      'a coordinator waiting for the job to be healthy',
      (t: string) =>
        t.replace(
          'etcd-rbac: { condition: service_completed_successfully }',
          'etcd-rbac: { condition: service_healthy }',
        ),
      /without service_completed_successfully/,
    ],
  ])('the policy reports %s', (_what, plant, problem) => {
    expect(composeFileProblems(parse(plant(source))).join('\n')).toMatch(problem);
  });
});
