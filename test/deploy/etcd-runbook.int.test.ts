/**
 * docs/deploy.md "etcd: quota, compaction, defragmentation", executed as written: a real etcd with
 * a small backend quota is filled until it raises NOSPACE and refuses writes; the `nospace`
 * runbook block (alarm list, compaction to the current revision, defrag, alarm disarm) brings it
 * back: writes are accepted again, the alarm is gone and the database is smaller than before; then
 * the `defragment` block runs on the healthy etcd. Only the endpoint is substituted (the
 * `ETCDCTL_*` environment points at the test's etcd; plain HTTP on loopback).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findEtcdBinary, freePorts, stopProcess, track, waitForHealth } from '@leasehold/devkit';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from './deploy-files.js';

const etcdBin = findEtcdBinary();
const etcdctl = spawnSync('sh', ['-c', 'command -v etcdctl'], { encoding: 'utf8' }).stdout.trim();
const skip = etcdBin === undefined ? 'etcd not installed' : etcdctl === '' ? 'etcdctl not installed' : undefined;
const dataDir = mkdtempSync(join(tmpdir(), 'leasehold-etcd-runbook-'));
const QUOTA = 8 * 1024 * 1024;

afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

/** The shell block tagged `<!-- runbook: NAME -->` in docs/deploy.md. */
function runbook(name: string): string {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'deploy.md'), 'utf8');
  const m = new RegExp(`<!-- runbook: ${name} -->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(doc);
  if (m === null) throw new Error(`no runbook block "${name}" in docs/deploy.md`);
  return m[1] ?? '';
}

describe.skipIf(skip !== undefined)(`docs/deploy.md etcd runbooks${skip ? ` (${skip})` : ''}`, () => {
  it('NOSPACE: filled to its quota etcd refuses writes; the runbook as written makes it take them again', async () => {
    const [client = 0, peer = 0] = await freePorts(2);
    const url = `http://127.0.0.1:${client}`;
    const etcd = spawn(
      etcdBin ?? 'etcd',
      [
        '--name', 'runbook', '--data-dir', join(dataDir, 'etcd'),
        '--listen-client-urls', url, '--advertise-client-urls', url,
        '--listen-peer-urls', `http://127.0.0.1:${peer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${peer}`,
        '--initial-cluster', `runbook=http://127.0.0.1:${peer}`, '--logger', 'zap', '--log-level', 'error',
        '--quota-backend-bytes', String(QUOTA), '--auto-compaction-mode', 'periodic', '--auto-compaction-retention', '5m',
      ], // prettier-ignore
      { detached: true, stdio: 'ignore' },
    );
    track(etcd);
    const env = { ...process.env, ETCDCTL_API: '3', ETCDCTL_ENDPOINTS: url };
    const ctl = (args: readonly string[], input?: string) =>
      spawnSync(etcdctl, args, { env, encoding: 'utf8', timeout: 20_000, ...(input === undefined ? {} : { input }) });
    const dbSize = () => {
      const status = ctl(['endpoint', 'status', '--write-out=json']);
      return Number(/"dbSize":([0-9]+)/.exec(status.stdout)?.[1] ?? Number.NaN);
    };
    try {
      await waitForHealth(url, 20_000);
      // Overwrite one key with 256 KiB values: every revision is kept until compaction.
      const value = 'v'.repeat(256 * 1024);
      let refused: ReturnType<typeof ctl> | undefined;
      for (let i = 0; i < 200 && refused === undefined; i++) {
        const put = ctl(['put', 'leasehold/filler'], value);
        if (put.status !== 0) refused = put;
      }
      expect(refused?.stderr).toMatch(/database space exceeded/);
      expect(ctl(['alarm', 'list']).stdout).toMatch(/alarm:NOSPACE/);
      expect(ctl(['put', 'leasehold/other', 'x']).stderr).toMatch(/database space exceeded/);
      const before = dbSize();
      expect(before).toBeGreaterThan(QUOTA / 2);

      const run = spawnSync('bash', ['-euo', 'pipefail', '-c', runbook('nospace')], {
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
      expect(run.stdout).toMatch(/alarm:NOSPACE/);
      expect(run.stdout).toMatch(/[Cc]ompacted revision/);
      expect(run.stdout).toMatch(/Finished defragmenting etcd member/);

      expect(ctl(['alarm', 'list']).stdout.trim()).toBe('');
      expect(ctl(['put', 'leasehold/other', 'x']).status).toBe(0);
      expect(ctl(['get', 'leasehold/filler', '--print-value-only']).stdout.trim()).toBe(value);
      expect(dbSize()).toBeLessThan(before / 4);

      const defrag = spawnSync('bash', ['-euo', 'pipefail', '-c', runbook('defragment')], {
        env,
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(defrag.status, `${defrag.stdout}\n${defrag.stderr}`).toBe(0);
      expect(defrag.stdout).toMatch(/Finished defragmenting etcd member/);
      expect(defrag.stdout).toMatch(/DB SIZE/);
    } finally {
      await stopProcess(etcd);
    }
  }, 120_000);
});
