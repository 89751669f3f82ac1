/**
 * The configuration Compose and Kubernetes give each of our containers is one the built daemon
 * accepts: deploy/make-secrets.sh writes the keys and certificates, each container's environment
 * (after YAML merge keys, `$(POD_NAME)` expanded) has its secret paths mapped onto those files,
 * and `leasehold-<service> --check-config` must say "configuration OK". The certificates it makes
 * must name every host the services are reached at (SINK_URL, COORDINATORS). No engine runs.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEPLOY_DIR,
  isCliJob,
  parseYamlDocuments,
  REPO_ROOT,
  serviceOf,
  text,
  type ServiceName,
} from './deploy-files.js';

const BUILT: Record<ServiceName, string> = {
  coordinator: join(REPO_ROOT, 'packages/cli/dist/coordinator-bin.js'),
  sink: join(REPO_ROOT, 'packages/cli/dist/sink-bin.js'),
  worker: join(REPO_ROOT, 'packages/cli/dist/worker-main.js'),
  cli: join(REPO_ROOT, 'packages/cli/dist/leasehold-main.js'),
};
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);

let composeSecrets = '';
let k8sSecrets = '';
beforeAll(() => {
  composeSecrets = mkdtempSync(join(tmpdir(), 'leasehold-compose-secrets-'));
  k8sSecrets = mkdtempSync(join(tmpdir(), 'leasehold-k8s-secrets-'));
  execFileSync('bash', [join(DEPLOY_DIR, 'make-secrets.sh'), composeSecrets], {
    stdio: 'pipe',
    env: { ...process.env, COORDINATORS: 'coordinator-a coordinator-b' },
  });
  execFileSync('bash', [join(DEPLOY_DIR, 'make-secrets.sh'), k8sSecrets, 'worker-0', 'worker-1', 'worker-2'], {
    stdio: 'pipe',
  });
});
afterAll(() => {
  for (const d of [composeSecrets, k8sSecrets]) if (d !== '') rmSync(d, { recursive: true, force: true });
});

function checkConfig(service: ServiceName, env: Record<string, string>) {
  const r = spawnSync(process.execPath, [BUILT[service], '--check-config'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

/** Subject alternative names of a certificate file. */
function sans(cert: string): string[] {
  const out = execFileSync('openssl', ['x509', '-in', cert, '-noout', '-ext', 'subjectAltName'], { encoding: 'utf8' });
  return [...out.matchAll(/(?:DNS|IP Address):([^,\s]+)/g)].map((m) => m[1] ?? '');
}
const hostsOf = (urls: string) =>
  urls
    .split(',')
    .filter(Boolean)
    .map((u) => new URL(u).hostname);

const compose = (() => {
  const doc = parseYamlDocuments({
    path: 'deploy/compose.yaml',
    text: readFileSync(join(DEPLOY_DIR, 'compose.yaml'), 'utf8'),
  })[0];
  return isObj(doc) && isObj(doc.services) ? doc.services : {};
})();
const argv = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
const composeServices = Object.entries(compose).flatMap(([name, svc]) => {
  if (!isObj(svc) || isCliJob(argv(svc.entrypoint))) return [];
  const service = serviceOf(`${text(svc.image)} ${text(isObj(svc.build) ? svc.build.target : '')}`);
  return service === undefined ? [] : [[name, service, svc] as const];
});

describe('Compose: each container configuration passes --check-config', () => {
  it.each(composeServices.map(([n, s, svc]) => [n, s, svc] as const))('%s (%s)', (_name, service, svc) => {
    const targets = new Map(
      (Array.isArray(svc.secrets) ? svc.secrets : []).map((s): [string, string] =>
        isObj(s) ? [text(s.target) || text(s.source), text(s.source)] : [text(s), text(s)],
      ),
    );
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(isObj(svc.environment) ? svc.environment : {})) {
      const value = text(v);
      const secret = /^\/run\/secrets\/(.+)$/.exec(value)?.[1];
      env[k] = secret === undefined ? value : join(composeSecrets, targets.get(secret) ?? `missing-${secret}`);
    }
    const r = checkConfig(service, env);
    expect(r.out).toContain('configuration OK');
    expect(r.status).toBe(0);
    // The hosts it reaches are named in the certificates it is given to trust.
    for (const url of [env.LEASEHOLD_COORDINATOR_SINK_URL, env.LEASEHOLD_WORKER_SINK_URL]) {
      if (url !== undefined)
        expect(sans(join(composeSecrets, 'sink.crt'))).toEqual(expect.arrayContaining(hostsOf(url)));
    }
    // Each coordinator a worker dials serves its own certificate, which names it.
    for (const host of hostsOf(env.LEASEHOLD_WORKER_COORDINATORS ?? '')) {
      expect(sans(join(composeSecrets, `${host}.crt`))).toContain(host);
    }
    // Each etcd identity it is given is signed by etcd's own CA.
    if (env.LEASEHOLD_COORDINATOR_ETCD_CERT !== undefined) {
      expect(verify(env.LEASEHOLD_COORDINATOR_ETCD_CA ?? '', env.LEASEHOLD_COORDINATOR_ETCD_CERT)).toBe(true);
      expect(verify(join(composeSecrets, 'ca.crt'), env.LEASEHOLD_COORDINATOR_ETCD_CERT)).toBe(false);
    }
  });
});

/** `openssl verify`: is `cert` signed by `ca`? */
function verify(ca: string, cert: string): boolean {
  return spawnSync('openssl', ['verify', '-CAfile', ca, cert], { encoding: 'utf8' }).status === 0;
}

describe('Compose: the etcd-rbac job', () => {
  const jobs = Object.entries(compose).filter(([, svc]) => isObj(svc) && isCliJob(argv(svc.entrypoint)));

  it('its arguments are a configuration the built CLI accepts (it then waits for etcd, which is not there)', () => {
    expect(jobs.map(([n]) => n)).toEqual(['etcd-rbac']);
    for (const [, svc] of jobs) {
      if (!isObj(svc)) continue;
      const args = [...argv(svc.entrypoint).slice(1), ...argv(svc.command), '--timeout-ms=0'].map((a) =>
        a.replace(/\/run\/secrets\/([^,\s]+)/g, (_m, name: string) => join(composeSecrets, name)),
      );
      const r = spawnSync(process.execPath, [BUILT.cli, ...args], { encoding: 'utf8', timeout: 30_000 });
      // 1: etcd did not answer (UNAVAILABLE); 2 would be a configuration error.
      expect(`${r.stdout}${r.stderr}`).toMatch(/UNAVAILABLE: etcd at https:\/\/etcd-1:2379/);
      expect(r.status).toBe(1);
    }
  });

  it("its users are the CNs of the coordinators' etcd certificates", () => {
    const [, svc] = jobs[0] ?? [];
    const users = (argv(isObj(svc) ? svc.command : []).find((a) => a.startsWith('--coordinator-users=')) ?? '')
      .slice('--coordinator-users='.length)
      .split(',');
    for (const user of users) {
      const subject = execFileSync(
        'openssl',
        ['x509', '-in', join(composeSecrets, `${user}-etcd.crt`), '-noout', '-subject'],
        {
          encoding: 'utf8',
        },
      );
      expect(subject.trim()).toBe(`subject=CN = ${user}`);
    }
    expect(users.sort()).toEqual(['coordinator-a', 'coordinator-b']);
  });
});

const k8sContainers = ['coordinator.yaml', 'sink.yaml', 'worker.yaml'].flatMap((file) =>
  parseYamlDocuments({ path: file, text: readFileSync(join(DEPLOY_DIR, 'k8s', file), 'utf8') })
    .filter(isObj)
    .flatMap((o) => {
      const pod = isObj(o.spec) && isObj(o.spec.template) && isObj(o.spec.template.spec) ? o.spec.template.spec : {};
      return list(pod.containers).flatMap((c) => {
        const service = serviceOf(text(c.image));
        return service === undefined ? [] : [[`${file} ${text(c.name)}`, service, c, pod] as const];
      });
    }),
);

describe('Kubernetes: each container configuration passes --check-config', () => {
  it.each(k8sContainers.map((x) => [...x] as const))('%s (%s)', (_name, service, c, pod) => {
    // Mounted secret files: mountPath/<item path> -> the generated file named by the item key.
    const files = new Map<string, string>();
    for (const m of list(c.volumeMounts)) {
      const volume = list(pod.volumes).find((v) => v.name === m.name);
      const sources = isObj(volume?.projected) ? list(volume.projected.sources) : [];
      for (const s of sources) {
        if (!isObj(s.secret)) continue;
        const items = list(s.secret.items);
        if (items.length === 0) files.set(`${text(m.mountPath)}/*`, k8sSecrets);
        for (const i of items) files.set(`${text(m.mountPath)}/${text(i.path)}`, join(k8sSecrets, text(i.key)));
      }
    }
    const env: Record<string, string> = {};
    for (const e of list(c.env)) {
      const value = text(e.value).replaceAll('$(POD_NAME)', `${service === 'worker' ? 'worker' : service}-0`);
      const dir = value.slice(0, value.lastIndexOf('/'));
      env[text(e.name)] =
        files.get(value) ?? (files.has(`${dir}/*`) ? join(k8sSecrets, value.slice(dir.length + 1)) : value);
    }
    const r = checkConfig(service, env);
    expect(r.out).toContain('configuration OK');
    expect(r.status).toBe(0);
    for (const url of [env.LEASEHOLD_COORDINATOR_SINK_URL, env.LEASEHOLD_WORKER_SINK_URL]) {
      if (url !== undefined) expect(sans(join(k8sSecrets, 'sink.crt'))).toEqual(expect.arrayContaining(hostsOf(url)));
    }
    if (env.LEASEHOLD_WORKER_COORDINATORS !== undefined) {
      expect(sans(join(k8sSecrets, 'coordinator.crt'))).toEqual(
        expect.arrayContaining(hostsOf(env.LEASEHOLD_WORKER_COORDINATORS)),
      );
    }
    if (env.LEASEHOLD_COORDINATOR_ETCD_CERT !== undefined) {
      expect(verify(env.LEASEHOLD_COORDINATOR_ETCD_CA ?? '', env.LEASEHOLD_COORDINATOR_ETCD_CERT)).toBe(true);
    }
  });

  it('a container whose secret file is missing does not pass (the check is real)', () => {
    const [, service, c] = k8sContainers.find(([, s]) => s === 'coordinator') ?? [];
    expect(service).toBe('coordinator');
    const env = Object.fromEntries(list(c?.env).map((e) => [text(e.name), text(e.value)]));
    const r = checkConfig('coordinator', env); // paths under /run/secrets/leasehold do not exist here
    expect(r.status).toBe(2);
    expect(r.out).toMatch(/SINK_KEY_FILE/);
  });
});
