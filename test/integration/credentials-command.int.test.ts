/**
 * `leasehold credentials add WORKER_ID` (the built CLI), where an operator provisions a new worker,
 * and the README's `leasehold` command lines as written:
 *
 * - on a `leasehold cluster up` data directory (the default `./.leasehold`): the credential goes
 *   into the cluster's state (the same one when asked again), the next `cluster up` passes it to
 *   its coordinator, and the built `leasehold-worker` started as the command says opens a session
 *   with it; while that cluster runs, the README's `pnpm leasehold submit / status / tail` lines work
 *   as written (run from the same directory);
 * - elsewhere: it prints the `keyId:workerId:secret` entry, writes the secret file (0600) and
 *   appends the entry to a coordinators' credentials file; a coordinator given that file accepts
 *   the worker, which it refused before.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEtcd, stopProcess, track, type EtcdHandle } from '@leasehold/devkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Stack } from '../harness/coordinator.js';
import { BIN, REPO_ROOT, Service, waitFor } from '../harness/service.js';

const CLI = join(REPO_ROOT, 'packages/cli/dist/leasehold-main.js');
const dir = mkdtempSync(join(tmpdir(), 'leasehold-credentials-'));
const env = { PATH: process.env.PATH ?? '', NO_COLOR: '1', LEASEHOLD_DEMO_DURATION_MS: '20' };

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function leasehold(args: string[], timeoutMs = 120_000): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: timeoutMs, env, cwd: dir });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

interface Added {
  keyId: string;
  workerId: string;
  entry: string;
  secretFile: string;
  existed: boolean;
  cluster?: { coordinator: string; sink: string; ca?: string };
}

function workerService(name: string, serviceDir: string, vars: Record<string, string>): Service {
  return new Service({
    name,
    bin: BIN.worker,
    dir: serviceDir,
    listens: false,
    env: { LEASEHOLD_WORKER_LOG_LEVEL: 'info', LEASEHOLD_WORKER_PRETTY: 'false', ...vars },
  });
}

const sessionStarted = (w: Service) => w.log().includes('"msg":"session started"');

/** The README's `pnpm leasehold …` command lines, as written (ID and R filled in). */
function readmeCommands(): string[][] {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/`pnpm leasehold ([^`]+)`/g)].map((m) =>
    (m[1] ?? '')
      .replace('--task-id ID', '--task-id readme-1')
      .replace('--resource R', '--resource readme/r')
      .split(' ')
      .map((w) => w.replace(/^'(.*)'$/, '$1')),
  );
}

describe('leasehold credentials add, on a cluster up data directory; the README commands', () => {
  const data = join(dir, '.leasehold'); // the default data dir of commands run in `dir`
  let cluster: ChildProcess | undefined;

  afterAll(async () => {
    if (cluster !== undefined) await stopProcess(cluster, 15_000);
  });

  it('puts the credential in the state; the next cluster up accepts the worker started as the command says', async () => {
    const first = leasehold(['cluster', 'up', '--until-done', '--workers', '1', '--tasks', '2']);
    expect(first.status, first.stderr).toBe(0);

    const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toContain('`leasehold credentials add billing-7`');
    const add = leasehold(['credentials', 'add', 'billing-7', '--json']);
    expect(add.status, add.stderr).toBe(0);
    const added = JSON.parse(add.stdout) as Added;
    expect(added).toMatchObject({ keyId: 'billing-7', workerId: 'billing-7', existed: false });
    expect(added.entry).toMatch(/^billing-7:billing-7:[A-Za-z0-9_-]{32}$/);
    expect(statSync(added.secretFile).mode & 0o777).toBe(0o600);
    const secret = added.entry.split(':')[2] ?? '';
    expect(readFileSync(added.secretFile, 'utf8').trim()).toBe(secret);
    const state = JSON.parse(readFileSync(join(data, 'cluster.json'), 'utf8')) as { keys: { workers: object } };
    expect(state.keys.workers).toMatchObject({ 'billing-7': secret });
    // Asked again: the same credential, nothing new.
    const again = leasehold(['credentials', 'add', 'billing-7']);
    expect(again.stdout.trim()).toBe(added.entry);
    expect(again.stderr).toMatch(/already has a credential/);
    expect(added.cluster?.ca).toBeDefined();

    let clusterErr = '';
    cluster = spawn(process.execPath, [CLI, 'cluster', 'up', '--workers', '1', '--tasks', '1'], {
      env,
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
      detached: true,
    });
    track(cluster);
    cluster.stderr?.on('data', (d: Buffer) => (clusterErr += d.toString('utf8')));
    await waitFor('the cluster', () => /cluster up: /.test(clusterErr), 60_000);

    const w = workerService('billing-7', dir, {
      LEASEHOLD_WORKER_COORDINATORS: added.cluster?.coordinator ?? '',
      LEASEHOLD_WORKER_SINK_URL: added.cluster?.sink ?? '',
      LEASEHOLD_WORKER_CA: added.cluster?.ca ?? '',
      LEASEHOLD_WORKER_KEY_ID: added.keyId,
      LEASEHOLD_WORKER_WORKER_ID: added.workerId,
      LEASEHOLD_WORKER_SECRET_FILE: added.secretFile,
    });
    try {
      await w.start();
      await waitFor('the session of billing-7', () => sessionStarted(w) || w.exits.length > 0, 20_000);
      expect(w.exits, w.tail()).toEqual([]);
      expect(sessionStarted(w)).toBe(true);
    } finally {
      await w.stop();
      w.close();
    }

    // The README's command lines, from the directory the cluster runs in.
    const commands = readmeCommands();
    expect(commands.map((c) => c[0])).toEqual(['status', 'tail', 'submit']);
    const byName = (name: string) => commands.find((c) => c[0] === name) ?? [];
    let tailOut = '';
    const tail = spawn(process.execPath, [CLI, ...byName('tail')], {
      env,
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(tail);
    tail.stdout.on('data', (d: Buffer) => (tailOut += d.toString('utf8')));
    const tailExit = new Promise<number | null>((r) => tail.once('exit', r));
    await waitFor('tail to follow the task events', () => /-- task events: following/.test(tailOut), 20_000);
    const submit = leasehold(byName('submit'));
    expect(submit.status, submit.stderr).toBe(0);
    await waitFor('tail to show the task', () => /task completed +readme-1/.test(tailOut), 20_000);
    await waitFor('the task done', () => /completed/.test(leasehold(['task', 'readme-1']).stdout), 20_000);
    const status = leasehold(byName('status'));
    expect(status.status, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/readme\/r.*readme-1.*completed/);
    tail.kill('SIGINT');
    expect(await tailExit).toBe(0);
  }, 240_000);
});

describe('leasehold credentials add, for coordinators of your own', () => {
  let etcd: EtcdHandle;
  let stack: Stack;

  beforeAll(async () => {
    etcd = await startEtcd();
    stack = await Stack.start({ etcd, prefix: 'test/credentials-command/' });
  });

  afterAll(async () => {
    await stack.close();
    await etcd.stop();
  });

  it('prints the entry, writes the secret file, appends to the credentials file; a coordinator given it accepts the worker', async () => {
    const credentialsFile = join(dir, 'worker-credentials');
    writeFileSync(credentialsFile, 'other-1:other-1:a-secret-of-another-worker-000\n', { mode: 0o600 });
    const secretOut = join(dir, 'own', 'ledger-3.secret');
    const add = leasehold([
      'credentials',
      'add',
      'ledger-3',
      '--data-dir',
      join(dir, 'no-cluster-here'),
      '--secret-out',
      secretOut,
      '--credentials-file',
      credentialsFile,
    ]);
    expect(add.status, add.stderr).toBe(0);
    const entry = add.stdout.trim();
    expect(entry).toMatch(/^ledger-3:ledger-3:[A-Za-z0-9_-]{32}$/);
    expect(readFileSync(credentialsFile, 'utf8').split('\n')).toEqual([
      'other-1:other-1:a-secret-of-another-worker-000',
      entry,
      '',
    ]);
    expect(statSync(secretOut).mode & 0o777).toBe(0o600);
    expect(add.stderr).toMatch(/LEASEHOLD_WORKER_SECRET_FILE=\S+ledger-3\.secret leasehold-worker --key-id ledger-3/);
    // A secret file is never overwritten.
    const twice = leasehold([
      'credentials',
      'add',
      'ledger-3',
      '--data-dir',
      join(dir, 'none'),
      '--secret-out',
      secretOut,
    ]);
    expect(twice.status).toBe(2);
    expect(twice.stderr).toMatch(/exists/);

    const worker = (name: string, url: string) =>
      workerService(name, stack.dir, {
        LEASEHOLD_WORKER_COORDINATORS: url,
        LEASEHOLD_WORKER_SINK_URL: stack.sinkUrl,
        LEASEHOLD_WORKER_KEY_ID: 'ledger-3',
        LEASEHOLD_WORKER_WORKER_ID: 'ledger-3',
        LEASEHOLD_WORKER_SECRET_FILE: secretOut,
      });
    const before = await stack.coordinator({
      LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: 'other-1:other-1:a-secret-of-another-worker-000',
    });
    const refused = worker('ledger-3-refused', before.url);
    await refused.start();
    expect(await waitFor('the refusal', () => refused.exits[0], 10_000)).toEqual({ code: 2, signal: null });
    refused.close();
    await before.close();

    const after = await stack.coordinator({
      LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: readFileSync(credentialsFile, 'utf8'),
    });
    const accepted = worker('ledger-3', after.url);
    try {
      await accepted.start();
      await waitFor('the session of ledger-3', () => sessionStarted(accepted), 10_000);
    } finally {
      await accepted.stop();
      accepted.close();
    }
  });
});
