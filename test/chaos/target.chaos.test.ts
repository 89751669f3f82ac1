/**
 * `pnpm chaos --target cluster.json` against a cluster that is not the runner's own: the target
 * file is checked (every problem listed), and (root) a netns cluster started here is described in
 * a target file — pid files, restart scripts, links in their namespaces, endpoints and keys — and
 * the random mix runs against it through that file only: pauses and kills by pid, restarts by the
 * scripts, links cut by nftables in the clients' namespaces. 0 violations.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { probeNetns } from '@leasehold/devkit';
import { startChaosCluster, type ChaosCluster } from '../harness/chaos-cluster.js';
import { linkNames } from '../harness/chaos-topology.js';
import { HANDLER_PATH, runChaos } from './runner.js';
import { parseTarget, type TargetFile } from './target.js';

const good = {
  name: 'staging',
  prefix: 'leasehold/',
  etcd: { endpoints: ['http://10.0.0.1:2379'] },
  sink: { url: 'http://10.0.0.5:7400', readKeyFile: '/etc/leasehold/read.key' },
  admin: { urls: ['http://10.0.0.7:7500'], keyFile: 'admin.key' },
  processes: [
    { name: 'etcd-m0', role: 'etcd', systemdUnit: 'etcd.service' },
    {
      name: 'coordinator-0',
      role: 'coordinator',
      pidFile: '/run/c0.pid',
      restart: ['systemctl', 'start', 'c0'],
      url: 'http://10.0.0.7:7500',
    },
    { name: 'worker-0', role: 'worker', pid: 4242, log: '/var/log/w0.log' },
  ],
  links: [{ name: 'coordinator-0->etcd-m0', ip: '10.0.0.1', port: 2379 }],
};

describe('chaos: target files', () => {
  it('parses a target file, resolving relative paths against its directory', () => {
    const t = parseTarget(JSON.stringify(good), '/srv/chaos');
    expect(t.admin.keyFile).toBe('/srv/chaos/admin.key');
    expect(t.processes.map((p) => p.name)).toEqual(['etcd-m0', 'coordinator-0', 'worker-0']);
    expect(t.links?.[0]).toEqual({ name: 'coordinator-0->etcd-m0', ip: '10.0.0.1', port: 2379 });
  });

  it('lists every problem of a bad target file at once', () => {
    const bad = {
      ...good,
      prefix: '',
      sink: { url: 'http://x' },
      processes: [
        { name: 'db', role: 'etcd', pid: 1, pidFile: '/x' },
        { name: 'worker-0', role: 'worker', pid: 2 },
      ],
      links: [{ name: 'nonsense', ip: '10.0.0.1' }],
    };
    let message = '';
    try {
      parseTarget(JSON.stringify(bad));
    } catch (err) {
      message = (err as Error).message;
    }
    for (const problem of [
      'prefix must be a non-empty string',
      'sink needs readKey or readKeyFile',
      'processes[0].name db: use etcd-mN',
      'processes[0] (db) needs exactly one of pid, pidFile, systemdUnit',
      'processes[1] (worker-0): a worker needs its log',
      'links[0].name must be client->server',
      'links[0].port must be a number',
    ])
      expect(message).toContain(problem);
  });
});

/** Describe a local cluster as a deployed one: pid files and restart scripts, links in their namespaces. */
function describeCluster(cluster: ChaosCluster, dir: string): TargetFile {
  const processes = [...cluster.processes.values()].map((p) => {
    const pidFile = join(cluster.dir, `${p.name}.pid`); // where the launch script writes it
    writeFileSync(pidFile, `${p.pid() ?? ''}\n`);
    const script = join(dir, `restart-${p.name}.sh`);
    writeFileSync(script, cluster.launchScript(p.name), { mode: 0o700 });
    const service = [...cluster.sinks, ...cluster.coordinators].find((s) => s.spec.name === p.name);
    return {
      name: p.name,
      role: p.role as 'etcd' | 'sink' | 'coordinator' | 'worker',
      pidFile,
      restart: ['sh', script],
      ...(p.logPath === undefined ? {} : { log: p.logPath }),
      ...(service === undefined ? {} : { url: service.url }),
    };
  });
  const links = linkNames(cluster.topology).flatMap((name) => {
    const e = cluster.network.endpoint(name);
    return e === undefined ? [] : [{ name, netns: e.ns, ip: e.ip, port: e.port }];
  });
  return {
    name: 'local-netns',
    prefix: cluster.prefix,
    sessionTtlMs: 2_000,
    etcd: { endpoints: cluster.etcdEndpoints },
    sink: { url: cluster.sink.url, readKey: cluster.keys.readKey },
    admin: { urls: cluster.coordinators.map((c) => c.url), key: cluster.keys.adminKey },
    processes,
    links,
  };
}

const support = probeNetns();

describe.skipIf(!support.ok)('chaos: against a deployed cluster (root)', () => {
  it(
    'runs the random mix through a target file only: pid kills, restart scripts, nftables links; 0 violations',
    { timeout: 240_000 },
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'leasehold-target-'));
      const cluster = await startChaosCluster({
        network: 'netns',
        etcdMembers: 1,
        coordinators: 2,
        workers: 3,
        handlerPath: HANDLER_PATH,
        dir: join(dir, 'cluster'),
        seed: 3,
      });
      const file = join(dir, 'cluster.json');
      const target = describeCluster(cluster, dir);
      writeFileSync(file, JSON.stringify(target, null, 2));
      try {
        const summary = await runChaos({
          // Seed 1's schedule kills worker-2, etcd-m0 and the sink: each comes back by its restart script.
          seed: 1,
          target: file,
          durationMs: 25_000,
          intervalMs: 3_000,
          tasks: 16,
          resources: 6,
          outDir: join(dir, 'out'),
          progress: false,
        });
        process.stderr.write(`[chaos target] faults ${JSON.stringify(summary.faults)}\n`);
        expect(summary.error, summary.error).toBeUndefined();
        expect(summary.violations).toEqual([]);
        expect(summary.environment.network).toBe('target');
        expect(summary.tasks.completed).toBe(summary.tasks.submitted);
        const kinds = Object.keys(summary.faults);
        expect(kinds.some((k) => k.startsWith('nft-') || k === 'partition')).toBe(true);
        expect(kinds).toEqual(expect.arrayContaining(['kill', 'pause']));
      } finally {
        // Processes the scripts restarted are not the harness' children: stop them by pid file.
        for (const p of target.processes) {
          const pid = Number(readFileSync(p.pidFile!, 'utf8').trim());
          const harnessPid = cluster.processes.get(p.name)?.pid();
          if (pid > 0 && pid !== harnessPid) {
            try {
              process.kill(-pid, 'SIGKILL');
            } catch {
              // gone already
            }
          }
        }
        await cluster.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});
