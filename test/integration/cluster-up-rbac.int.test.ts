/**
 * `leasehold cluster up` with one identity per service and etcd RBAC (issue 22), from the built
 * CLI, on a data directory made the way cluster up made them before: one CA, one `services`
 * certificate for the sink and the coordinator, etcd trusting that CA with `--client-cert-auth` and
 * no users, and leasehold keys already in etcd.
 *
 * - the first run migrates it: the shared certificates are removed, etcd gets its users, roles and
 *   auth, the demo runs to the end (the coordinator works under its role), nothing complains;
 * - a second run changes no user or role (idempotent) and, while it runs, the sink's files cannot
 *   talk to etcd at all, the coordinator's reach only its prefix, and the old keys are still there;
 *   and its etcd runs with leasehold's space settings (test/deploy/etcd-space.ts): the quota as etcd
 *   reports it in /metrics, the auto-compaction flags of the etcd process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openPki } from '@leasehold/cli/pki';
import { findEtcdBinary, freePorts, stopProcess, track, waitForHealth } from '@leasehold/devkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ETCD_QUOTA_BYTES, etcdSpaceProblems } from '../deploy/etcd-space.js';
import { etcdAs, etcdOutcome } from '../harness/etcd-access.js';
import { etcdGauge, etcdProcessFlags } from '../harness/etcd-settings.js';
import { waitFor } from '../harness/service.js';

const CLI = fileURLToPath(new URL('../../packages/cli/dist/leasehold-main.js', import.meta.url));
const etcdBin = findEtcdBinary();
const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-cluster-rbac-'));
const pki = join(dataDir, 'pki');
const MARKER = 'leasehold/pre-rbac-marker';
let etcdUrl = '';

afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

/** The data directory of a cluster up from before one identity per service, with a key in etcd. */
async function makeLegacyDataDir(): Promise<void> {
  const [etcdClient = 0, etcdPeer = 0, sink = 0, coordinator = 0] = await freePorts(4);
  etcdUrl = `https://127.0.0.1:${etcdClient}`;
  const secret = (n: number) => `legacy-secret-${n}-0123456789abcdef`;
  writeFileSync(
    join(dataDir, 'cluster.json'),
    JSON.stringify({
      version: 2,
      tls: true,
      ports: { etcdClient, etcdPeer, sink, coordinator },
      keys: { sink: secret(1), capability: `k1:${secret(2)}`, admin: secret(3), workers: {} },
      runs: 1,
    }),
  );
  const old = openPki(pki);
  old.server('services', ['127.0.0.1', 'localhost']);
  const server = old.server('etcd', ['127.0.0.1', 'localhost']);
  old.client('coordinator-etcd', 'leasehold-coordinator');
  const probe = old.client('etcd-probe', 'leasehold-probe');
  mkdirSync(join(dataDir, 'etcd'), { mode: 0o700 });
  const peer = `http://127.0.0.1:${etcdPeer}`;
  const etcd = spawn(
    etcdBin ?? 'etcd',
    [
      '--name', 'leasehold-local', '--data-dir', join(dataDir, 'etcd'),
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `leasehold-local=${peer}`, '--log-level', 'error', '--logger', 'zap',
      '--cert-file', server.cert, '--key-file', server.key, '--trusted-ca-file', old.ca, '--client-cert-auth',
    ], // prettier-ignore
    { detached: true, stdio: 'ignore' },
  );
  track(etcd);
  try {
    const tls = { ca: readFileSync(old.ca), cert: readFileSync(probe.cert), key: readFileSync(probe.key) };
    await waitForHealth(etcdUrl, 20_000, tls);
    const client = etcdAs([etcdUrl], old.ca, probe);
    try {
      await client.put(MARKER).value('kept');
    } finally {
      client.close();
    }
  } finally {
    await stopProcess(etcd);
  }
}

/** Our services' warnings and errors (etcd's own lines aside). */
function complaints(stdout: string): string[] {
  return stdout
    .split('\n')
    .filter((l) => !l.startsWith('etcd'))
    .filter((l) => /\b(WARN|ERROR|FATAL|WARNING|PANIC)\b|"level":(40|50|60)/.test(l))
    .filter((l) => !/WARN: heartbeat unanswered; reconnecting/.test(l));
}

const upArgs = ['cluster', 'up', '--tasks', '6', '--workers', '2', '--data-dir', dataDir];
const env = { ...process.env, NO_COLOR: '1', LEASEHOLD_DEMO_DURATION_MS: '50' };

describe.skipIf(etcdBin === undefined)('leasehold cluster up: one identity per service, etcd RBAC', () => {
  beforeAll(makeLegacyDataDir, 60_000);

  it('migrates a data dir from before: shared certificates removed, RBAC on, the demo runs to the end', () => {
    const run = spawnSync(process.execPath, [CLI, ...upArgs, '--until-done'], {
      encoding: 'utf8',
      timeout: 180_000,
      env,
    });
    const out = `${run.stderr}\n${run.stdout}`;
    expect(run.status, out).toBe(0);
    expect(out).toMatch(/removed the shared certificates \(services\.crt services\.key/);
    expect(out).toMatch(/etcd: user coordinator-1 created/);
    expect(out).toMatch(
      /etcd: authentication on; user coordinator-1 \(role leasehold-coordinator\) may use leasehold\/ only/,
    );
    expect(out).toMatch(/demo complete: 6 tasks, each with exactly one result at the sink/);
    expect(complaints(run.stdout)).toEqual([]);
    for (const legacy of ['services', 'etcd', 'coordinator-etcd', 'etcd-probe'])
      expect(existsSync(join(pki, `${legacy}.key`)), legacy).toBe(false);
  }, 200_000);

  it("runs again without changing a user or role; the sink's files cannot talk to etcd, the coordinator's only to its prefix; etcd has the quota and auto-compaction", async () => {
    const child = spawn(process.execPath, [CLI, ...upArgs], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    track(child);
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    try {
      await waitFor('the second demo to complete', () => (/demo complete/.test(out) ? true : undefined), 150_000, 200);
      expect(out).toMatch(/submitted 6 demo tasks \(run 3\)/);
      expect(out).not.toMatch(/etcd: (user|role) .* (created|granted|revoked)/);
      expect(out).not.toMatch(/removed the shared certificates/);

      const etcdCa = join(pki, 'etcd', 'ca.crt');
      const sink = etcdAs([etcdUrl], etcdCa, { cert: join(pki, 'sink.crt'), key: join(pki, 'sink.key') });
      const coordinator = etcdAs([etcdUrl], etcdCa, {
        cert: join(pki, 'etcd', 'coordinator-1.crt'),
        key: join(pki, 'etcd', 'coordinator-1.key'),
      });
      try {
        expect(await etcdOutcome(() => sink.getAll().prefix('leasehold/').keys())).toBe('no connection');
        expect(await etcdOutcome(() => sink.put('leasehold/sink-was-here').value('x').exec())).toBe('no connection');
        expect(await coordinator.get(MARKER).string()).toBe('kept');
        expect(await etcdOutcome(() => coordinator.getAll().keys())).toBe('permission denied');
        expect(await etcdOutcome(() => coordinator.put('elsewhere/x').value('x').exec())).toBe('permission denied');
      } finally {
        sink.close();
        coordinator.close();
      }

      // etcd's space settings, from etcd itself: the quota in force, and the process's flags.
      const root = {
        ca: readFileSync(etcdCa),
        cert: readFileSync(join(pki, 'etcd', 'root.crt')),
        key: readFileSync(join(pki, 'etcd', 'root.key')),
      };
      expect(await etcdGauge(etcdUrl, 'etcd_server_quota_backend_bytes', root)).toBe(ETCD_QUOTA_BYTES);
      expect(etcdSpaceProblems('cluster up', etcdProcessFlags(join(dataDir, 'etcd')))).toEqual([]);
    } finally {
      // cluster up stops its processes in order on SIGTERM (workers, coordinator, sink, etcd).
      await stopProcess(child, 30_000);
    }
    expect(out).toMatch(/stopping the cluster/);
    expect(complaints(out)).toEqual([]);
  }, 200_000);
});
