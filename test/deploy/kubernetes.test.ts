/**
 * deploy/k8s without a cluster: every manifest is valid against the vendored, strict Kubernetes
 * schemas (an unknown or misspelt field fails), the kustomization lists exactly the manifests and
 * the secret files each pod mounts, and every pod follows the policy: non-root, read-only root
 * filesystem, no capabilities, RuntimeDefault seccomp, requests and limits, /healthz and /readyz
 * probes on our HTTP services, secrets only as mounted files read through `*_FILE` options; etcd
 * with leasehold's backend quota and auto-compaction, and the memory and volume that quota needs
 * (etcd-space.ts). Each check is shown to fail on a planted copy.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEPLOY_DIR, envEntries, parseYamlDocuments, resolveEnvName, serviceOf, text } from './deploy-files.js';
import { etcdRoomProblems, etcdSpaceProblems, flagOfEnv } from './etcd-space.js';
import { kubernetesProblems } from './schemas.js';

const K8S = join(DEPLOY_DIR, 'k8s');
type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);
const at = (v: unknown, ...path: string[]): unknown => path.reduce<unknown>((o, k) => (isObj(o) ? o[k] : undefined), v);

const manifestFiles = readdirSync(K8S)
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .sort();
const read = (file: string, source = readFileSync(join(K8S, file), 'utf8')): Obj[] =>
  parseYamlDocuments({ path: `deploy/k8s/${file}`, text: source }).filter(isObj);
const objects = manifestFiles.flatMap((f) => read(f).map((o) => ({ file: f, o })));
const kustomization = read('kustomization.yaml')[0] ?? {};

/** Every file a kustomize secretGenerator makes into a Secret: secret name -> its keys. */
function generatedSecrets(k: Obj): Map<string, string[]> {
  return new Map(
    list(k.secretGenerator).map((g) => [
      text(g.name),
      (Array.isArray(g.files) ? g.files : []).map((f) => {
        const s = text(f);
        return s.includes('=') ? s.slice(0, s.indexOf('=')) : s.slice(s.lastIndexOf('/') + 1);
      }),
    ]),
  );
}

/** The policy for one workload (Deployment / StatefulSet): every problem. */
export function podProblems(o: Obj, secrets: Map<string, string[]>): string[] {
  const name = `${text(o.kind)}/${text(at(o, 'metadata', 'name'))}`;
  const pod = at(o, 'spec', 'template', 'spec');
  if (!isObj(pod)) return [`${name}: no pod template`];
  const problems: string[] = [];
  const podSc = isObj(pod.securityContext) ? pod.securityContext : {};
  if (podSc.runAsNonRoot !== true) problems.push(`${name}: pod runAsNonRoot is not true`);
  if (typeof podSc.runAsUser !== 'number' || podSc.runAsUser === 0) problems.push(`${name}: no non-zero runAsUser`);
  if (at(podSc, 'seccompProfile', 'type') !== 'RuntimeDefault')
    problems.push(`${name}: pod seccompProfile is not RuntimeDefault`);
  if (pod.automountServiceAccountToken !== false) problems.push(`${name}: service account token mounted`);
  const volumes = new Map(list(pod.volumes).map((v) => [text(v.name), v]));
  for (const c of [...list(pod.initContainers), ...list(pod.containers)]) {
    const cn = `${name} container ${text(c.name)}`;
    const sc = isObj(c.securityContext) ? c.securityContext : {};
    if (sc.allowPrivilegeEscalation !== false) problems.push(`${cn}: allowPrivilegeEscalation is not false`);
    if (sc.readOnlyRootFilesystem !== true) problems.push(`${cn}: readOnlyRootFilesystem is not true`);
    const drop = at(sc, 'capabilities', 'drop');
    if (!Array.isArray(drop) || !drop.includes('ALL')) problems.push(`${cn}: capabilities do not drop ALL`);
    if (at(sc, 'capabilities', 'add') !== undefined) problems.push(`${cn}: adds capabilities`);
    if (sc.privileged === true) problems.push(`${cn}: privileged`);
    for (const kind of ['requests', 'limits']) {
      for (const r of ['cpu', 'memory']) {
        if (at(c, 'resources', kind, r) === undefined) problems.push(`${cn}: no resources.${kind}.${r}`);
      }
    }
    const service = serviceOf(text(c.image));
    // Our HTTP services: liveness on /healthz, readiness on /readyz, on the container's port.
    if (service === 'coordinator' || service === 'sink') {
      const ports = list(c.ports).map((p) => text(p.name));
      for (const [probe, path] of [
        ['livenessProbe', '/healthz'],
        ['readinessProbe', '/readyz'],
      ] as const) {
        const get = at(c, probe, 'httpGet');
        if (!isObj(get) || get.path !== path || !ports.includes(text(get.port))) {
          problems.push(`${cn}: ${probe} is not httpGet ${path} on a container port`);
        }
      }
    }
    // Secrets: never in the environment; every *_FILE (and TLS key) is a file of a mounted Secret.
    const mounts = list(c.volumeMounts);
    for (const e of list(c.env)) {
      if (at(e, 'valueFrom', 'secretKeyRef') !== undefined)
        problems.push(`${cn}: ${text(e.name)} from secretKeyRef; mount it as a file`);
    }
    if (service === undefined) continue;
    for (const [envName, value] of envEntries(c.env)) {
      const r = resolveEnvName(envName);
      if (!('service' in r)) continue;
      const spec = r.service.options[r.option];
      const isSecretPath = r.file || r.option === 'tls-key';
      if (!isSecretPath) {
        if (spec?.secret === true) problems.push(`${cn}: ${envName} is a secret given inline`);
        continue;
      }
      const path = value ?? '';
      const mount = mounts.find((m) => path.startsWith(`${text(m.mountPath)}/`));
      const volume = mount === undefined ? undefined : volumes.get(text(mount.name));
      if (mount === undefined || volume === undefined) {
        problems.push(`${cn}: ${envName}=${path} is not under a mounted volume`);
        continue;
      }
      const fileName = path.slice(text(mount.mountPath).length + 1);
      const sources = [
        ...(isObj(volume.secret) ? [{ secret: volume.secret }] : []),
        ...list(at(volume, 'projected', 'sources')),
      ];
      const found = sources.some((s) => {
        if (!isObj(s.secret)) return false;
        const keys = secrets.get(text(s.secret.name)) ?? [];
        const items = list(s.secret.items);
        if (items.length > 0) return items.some((i) => text(i.path) === fileName && keys.includes(text(i.key)));
        // Whole Secret: a key matches the file name (`$(POD_NAME)` stands for every worker pod's name).
        return keys.some((k) =>
          new RegExp(`^${fileName.replace(/[.]/g, '\\.').replace('$(POD_NAME)', '.+')}$`).test(k),
        );
      });
      if (!found) problems.push(`${cn}: ${envName}=${path} is no key of a Secret mounted there`);
    }
  }
  return problems;
}

/** The etcd StatefulSet: its space settings, and room for them. */
export function etcdProblems(o: Obj): string[] {
  const container = list(at(o, 'spec', 'template', 'spec', 'containers')).find((c) => text(c.name) === 'etcd');
  if (container === undefined) return ['StatefulSet/etcd: no etcd container'];
  const settings = new Map<string, string>();
  for (const [k, v] of envEntries(container.env)) {
    const flag = flagOfEnv(k);
    if (flag !== undefined && v !== undefined) settings.set(flag, v);
  }
  const claim = list(at(o, 'spec', 'volumeClaimTemplates'))[0];
  return [
    ...etcdSpaceProblems('StatefulSet/etcd', settings),
    ...etcdRoomProblems(
      'StatefulSet/etcd',
      text(at(container, 'resources', 'limits', 'memory')),
      text(at(claim, 'spec', 'resources', 'requests', 'storage')),
    ),
  ];
}

describe('deploy/k8s', () => {
  it('every YAML document parses, and every object is valid against the vendored strict schema of its kind', () => {
    expect(objects.length).toBeGreaterThan(0);
    for (const { file, o } of objects) expect([file, kubernetesProblems(o)]).toEqual([file, []]);
  });

  it('has the workloads the deployment needs', () => {
    const kinds = objects.map(({ o }) => `${text(o.kind)}/${text(at(o, 'metadata', 'name'))}`).sort();
    expect(kinds).toEqual(
      expect.arrayContaining([
        'Deployment/coordinator',
        'PodDisruptionBudget/coordinator',
        'Service/coordinator',
        'StatefulSet/sink',
        'Service/sink',
        'StatefulSet/etcd',
        'StatefulSet/worker',
      ]),
    );
    const sinkService = objects.find(({ o }) => o.kind === 'Service' && at(o, 'metadata', 'name') === 'sink')?.o;
    expect(at(sinkService, 'spec', 'clusterIP')).toBe('None');
    const sink = objects.find(({ o }) => o.kind === 'StatefulSet' && at(o, 'metadata', 'name') === 'sink')?.o;
    expect(list(at(sink, 'spec', 'volumeClaimTemplates')).length).toBe(1);
  });

  it('every pod follows the policy (non-root, read-only, no capabilities, seccomp, resources, probes, secrets as files)', () => {
    const secrets = generatedSecrets(kustomization);
    for (const { o } of objects.filter(({ o }) => o.kind === 'Deployment' || o.kind === 'StatefulSet')) {
      expect(podProblems(o, secrets)).toEqual([]);
    }
  });

  it('the kustomization lists exactly the manifests, and secret files the make-secrets script writes', () => {
    expect(kustomization.kind).toBe('Kustomization');
    expect((kustomization.resources as unknown[]).map(text).sort()).toEqual(manifestFiles);
    const script = readFileSync(join(DEPLOY_DIR, 'make-secrets.sh'), 'utf8');
    for (const [, keys] of generatedSecrets(kustomization)) {
      for (const key of keys) {
        const made = /^worker-\d+\.secret$/.test(key) || script.includes(key);
        expect(made, `${key}: not written by deploy/make-secrets.sh`).toBe(true);
      }
    }
    for (const f of manifestFiles) expect(existsSync(join(K8S, f))).toBe(true);
  });

  it("etcd runs with leasehold's quota and auto-compaction, with memory and volume for that quota", () => {
    const etcd = objects.find(({ o }) => o.kind === 'StatefulSet' && at(o, 'metadata', 'name') === 'etcd')?.o ?? {};
    expect(etcdProblems(etcd)).toEqual([]);
  });

  const etcdText = readFileSync(join(K8S, 'etcd.yaml'), 'utf8');
  const etcdSet = (source: string) => read('etcd.yaml', source).find((o) => o.kind === 'StatefulSet') ?? {};
  it.each([
    [
      'history kept by revision count',
      (t: string) =>
        t.replace('ETCD_AUTO_COMPACTION_RETENTION, value: 5m }', "ETCD_AUTO_COMPACTION_RETENTION, value: '10000' }"),
      /--auto-compaction-retention is 10000, expected 5m/,
    ],
    [
      'no quota',
      (t: string) => t.replace("            - { name: ETCD_QUOTA_BACKEND_BYTES, value: '2147483648' }\n", ''),
      /without --quota-backend-bytes/,
    ],
    ['a memory limit below the quota', (t: string) => t.replace('memory: 3Gi }', 'memory: 1Gi }'), /memory limit 1Gi/],
    ['a volume too small to defragment', (t: string) => t.replace('storage: 8Gi', 'storage: 4Gi'), /volume 4Gi/],
  ])('the etcd policy reports %s', (_what, plant, problem) => {
    const planted = plant(etcdText);
    expect(planted).not.toBe(etcdText);
    expect(etcdProblems(etcdSet(planted)).join('\n')).toMatch(problem);
  });

  // The checks are not vacuous: planted mistakes are reported.
  const coordinatorText = readFileSync(join(K8S, 'coordinator.yaml'), 'utf8');
  const coordinator = (source: string) => read('coordinator.yaml', source).find((o) => o.kind === 'Deployment') ?? {};
  it.each([
    ['a misspelt field', (t: string) => t.replace('readinessProbe:', 'readinesProbe:'), /readinesProbe/],
    ['a wrong type', (t: string) => t.replace('replicas: 2', "replicas: 'two'"), /replicas must be integer/],
    [
      'a missing required field',
      (t: string) => t.replace(/ {6}containers:\n/, '      sidecars:\n'),
      /containers|sidecars/,
    ],
  ])('the schema rejects %s', (_what, plant, problem) => {
    expect(kubernetesProblems(coordinator(plant(coordinatorText))).join('\n')).toMatch(problem);
  });

  it.each([
    ['root allowed', (t: string) => t.replace('runAsNonRoot: true', 'runAsNonRoot: false'), /runAsNonRoot/],
    [
      'a writable root filesystem',
      (t: string) => t.replace('readOnlyRootFilesystem: true', 'readOnlyRootFilesystem: false'),
      /readOnlyRootFilesystem/,
    ],
    ['capabilities kept', (t: string) => t.replace('drop: [ALL]', 'drop: [NET_RAW]'), /drop ALL/],
    [
      'no seccomp profile',
      (t: string) => t.replace('seccompProfile: { type: RuntimeDefault }', 'seccompProfile: { type: Unconfined }'),
      /seccompProfile/,
    ],
    [
      'no memory limit',
      (t: string) => t.replace("limits: { cpu: '2', memory: 768Mi }", "limits: { cpu: '2' }"),
      /limits\.memory/,
    ],
    [
      'liveness on /readyz',
      (t: string) => t.replace('httpGet: { path: /healthz', 'httpGet: { path: /readyz'),
      /livenessProbe/,
    ],
    [
      'a secret from secretKeyRef',
      (t: string) =>
        t.replace(
          "- { name: LEASEHOLD_COORDINATOR_PORT, value: '7500' }",
          '- name: LEASEHOLD_COORDINATOR_PORT\n              valueFrom: { secretKeyRef: { name: x, key: y } }',
        ),
      /secretKeyRef/,
    ],
    [
      'a secret inline',
      (t: string) =>
        t.replace(
          'LEASEHOLD_COORDINATOR_ADMIN_KEYS_FILE, value: /run/secrets/leasehold/admin-keys',
          'LEASEHOLD_COORDINATOR_ADMIN_KEYS, value: abcdefghijklmnopqrstuvw',
        ),
      /given inline/,
    ],
    [
      'a _FILE outside any mount',
      (t: string) => t.replace('/run/secrets/leasehold/sink-key }', '/etc/sink-key }'),
      /not under a mounted volume/,
    ],
    [
      'a _FILE of a key not projected',
      (t: string) => t.replace('- { key: admin-keys, path: admin-keys }', '- { key: admin-keys, path: admin-key }'),
      /admin-keys is no key/,
    ],
  ])('the policy reports %s', (_what, plant, problem) => {
    expect(podProblems(coordinator(plant(coordinatorText)), generatedSecrets(kustomization)).join('\n')).toMatch(
      problem,
    );
  });
});
