/**
 * docs/operations.md "Two hosts, step by step", executed as written: every shell block tagged
 * `<!-- walkthrough: HOST [daemon] -->` runs on its host, each host a network namespace with its
 * own address (root only; skipped with the reason otherwise). Only these substitutions are made:
 * the example addresses 10.0.0.x become the namespaces' addresses, `/etc/leasehold` and `/var/lib/`
 * a temporary directory, and the bins on PATH are this checkout's builds (the packed-install test
 * covers installing them). Blocks tagged `daemon` run in the background for the rest of the walk;
 * the others must exit 0. The walk ends with the task completed by worker billing-1, with etcd
 * authentication and RBAC on (step 3b, `leasehold etcd-rbac`): the coordinator works as its own
 * etcd user, confined to its prefix; after the walk, the sink's files are refused by etcd, and etcd
 * runs with leasehold's space settings (test/deploy/etcd-space.ts): the quota as etcd reports it in
 * /metrics, the auto-compaction flags of the etcd process.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { NetnsLab, probeNetns } from '@leasehold/devkit';
import { ETCD_QUOTA_BYTES, etcdSpaceProblems } from '../deploy/etcd-space.js';
import { etcdAs, etcdOutcome } from '../harness/etcd-access.js';
import { etcdGauge, etcdProcessFlags } from '../harness/etcd-settings.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const DOC = join(REPO, 'docs', 'operations.md');

interface Step {
  readonly host: string;
  readonly daemon: boolean;
  readonly script: string;
}

/** The tagged blocks of the walkthrough section, in order. */
function walkthroughSteps(markdown: string): Step[] {
  const start = markdown.indexOf('## Two hosts, step by step');
  if (start < 0) throw new Error('no "Two hosts, step by step" section in docs/operations.md');
  const end = markdown.indexOf('\n## ', start + 5);
  const section = markdown.slice(start, end < 0 ? undefined : end);
  const steps: Step[] = [];
  for (const m of section.matchAll(/<!-- walkthrough: (\w+)( daemon)? -->\s*```sh\n([\s\S]*?)```/g)) {
    steps.push({ host: m[1] ?? '', daemon: m[2] !== undefined, script: m[3] ?? '' });
  }
  return steps;
}

function missingTool(): string | undefined {
  const support = probeNetns();
  if (!support.ok) return support.reason;
  for (const tool of ['etcd', 'openssl', 'curl']) {
    if (spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) return `${tool} not installed`;
  }
  return undefined;
}

const skip = missingTool();
const root = mkdtempSync(join(tmpdir(), 'leasehold-two-hosts-'));
const daemons: ChildProcess[] = [];
let lab: NetnsLab | undefined;

afterAll(async () => {
  for (const d of daemons) {
    if (d.pid !== undefined && d.exitCode === null) {
      try {
        process.kill(-d.pid, 'SIGTERM');
      } catch {
        // gone
      }
    }
  }
  await Promise.all(
    daemons.map((d) =>
      d.exitCode !== null
        ? Promise.resolve()
        : new Promise<void>((r) =>
            d.once('exit', () => {
              r();
            }),
          ),
    ),
  );
  lab?.destroy();
  rmSync(root, { recursive: true, force: true });
});

describe.skipIf(skip !== undefined)(`docs/operations.md, two hosts step by step${skip ? ` (${skip})` : ''}`, () => {
  it('finds the walkthrough blocks', () => {
    const steps = walkthroughSteps(readFileSync(DOC, 'utf8'));
    expect(steps.map((s) => `${s.host}${s.daemon ? ' daemon' : ''}`)).toEqual([
      'admin',
      'etcd daemon',
      'etcd',
      'sink daemon',
      'coordinator daemon',
      'worker',
      'worker daemon',
      'worker',
    ]);
  });

  it('runs as written: the task submitted at the end is completed by worker billing-1', async () => {
    lab = NetnsLab.create();
    const hosts = {
      etcd: lab.addHost('etcd', 'e'),
      sink: lab.addHost('sink', 's'),
      coordinator: lab.addHost('coordinator', 'c'),
      worker: lab.addHost('worker', 'w'),
    };
    const addresses: Record<string, string> = {
      '10.0.0.10': hosts.etcd.ip,
      '10.0.0.20': hosts.sink.ip,
      '10.0.0.30': hosts.coordinator.ip,
      '10.0.0.40': hosts.worker.ip,
    };
    chmodSync(root, 0o755);
    const bin = join(root, 'bin');
    mkdirSync(bin);
    for (const [name, file] of [
      ['leasehold', 'leasehold-main.js'],
      ['leasehold-sink', 'sink-bin.js'],
      ['leasehold-coordinator', 'coordinator-bin.js'],
      ['leasehold-worker', 'worker-main.js'],
    ] as const) {
      const target = join(REPO, 'packages', 'cli', 'dist', file);
      writeFileSync(join(bin, name), `#!/bin/sh\nexec "${process.execPath}" "${target}" "$@"\n`, { mode: 0o755 });
    }
    const substitute = (script: string): string => {
      let out = script.replaceAll('/etc/leasehold', join(root, 'etc')).replaceAll('/var/lib/', `${root}/var/`);
      for (const [example, real] of Object.entries(addresses)) out = out.replaceAll(example, real);
      return out;
    };
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, NO_COLOR: '1' };
    const nsOf = (host: string): readonly string[] => {
      if (host === 'admin') return [];
      if (!(host in hosts)) throw new Error(`unknown host ${host} in the walkthrough`);
      return hosts[host as keyof typeof hosts].launcher;
    };

    let last = '';
    for (const [i, step] of walkthroughSteps(readFileSync(DOC, 'utf8')).entries()) {
      const argv = [...nsOf(step.host), 'bash', '-euo', 'pipefail', '-c', substitute(step.script)];
      if (step.daemon) {
        const log = createWriteStream(join(root, `step-${i}-${step.host}.log`));
        const child = spawn(argv[0] ?? 'bash', argv.slice(1), { cwd: REPO, env, detached: true });
        child.stdout.pipe(log);
        child.stderr.pipe(log);
        daemons.push(child);
        continue;
      }
      const run = spawnSync(argv[0] ?? 'bash', argv.slice(1), { cwd: REPO, env, encoding: 'utf8', timeout: 120_000 });
      const logs = daemons
        .map((_, d) => `--- daemon ${d}: exit ${String(daemons[d]?.exitCode)}`)
        .concat(spawnSync('sh', ['-c', `tail -n 15 ${root}/step-*.log`], { encoding: 'utf8' }).stdout.split('\n'))
        .join('\n');
      expect(run.status, `step ${i} (${step.host}) failed:\n${run.stdout}\n${run.stderr}\n${logs}`).toBe(0);
      last = run.stdout;
      if (process.env.WALK_DEBUG) process.stderr.write(`step ${i}: ${run.stdout}\n`);
    }
    expect(last).toMatch(/^state\s+completed/m);
    expect(last).toMatch(/^\s+1\s+completed\s+billing-1\s+\d+/m);

    // etcd, as the walk left it: the sink's certificate and key cannot even open a TLS connection
    // (another CA, no client usage); the coordinator's identity works in its prefix only.
    const etc = join(root, 'etc');
    const etcdUrl = [`https://${hosts.etcd.ip}:2379`];
    const files = (name: string) => ({ cert: join(etc, `${name}.crt`), key: join(etc, `${name}.key`) });
    const sink = etcdAs(etcdUrl, join(etc, 'etcd-ca.crt'), files('sink'));
    const coordinator = etcdAs(etcdUrl, join(etc, 'etcd-ca.crt'), files('coordinator-etcd'));
    try {
      expect(await etcdOutcome(() => sink.getAll().prefix('leasehold/').keys())).toBe('no connection');
      expect(await etcdOutcome(() => coordinator.getAll().prefix('leasehold/tasks/').keys())).toBe('ok');
      expect(await etcdOutcome(() => coordinator.put('outside/x').value('x').exec())).toBe('permission denied');
    } finally {
      sink.close();
      coordinator.close();
    }

    // etcd's space settings as the walkthrough gave them, from etcd itself.
    const rootTls = {
      ca: readFileSync(join(etc, 'etcd-ca.crt')),
      cert: readFileSync(join(etc, 'etcd-root.crt')),
      key: readFileSync(join(etc, 'etcd-root.key')),
    };
    expect(await etcdGauge(etcdUrl[0] ?? '', 'etcd_server_quota_backend_bytes', rootTls)).toBe(ETCD_QUOTA_BYTES);
    expect(etcdSpaceProblems('walkthrough', etcdProcessFlags(`${root}/var/etcd`))).toEqual([]);
  }, 180_000);
});
