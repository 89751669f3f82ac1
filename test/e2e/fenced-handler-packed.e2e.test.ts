/**
 * Issue 25 "Done when" 1: the fence inside the user's own database, from the packed tarballs, as a
 * user installs them.
 *
 * An empty project installs the PACKED `@leasehold/worker`, `@leasehold/fence-pg` (and what they
 * depend on) offline (`scripts/release-pack.sh --no-build`: the suite's build as `pnpm release:pack`
 * packs it) next to `pg`, and runs a user's worker (fixtures/fenced-ledger-worker.mjs, plain JS,
 * public API only) that moves money between two rows of the user's own `accounts` table with
 * `ctx.fencedTransaction`, against a cluster of real processes (etcd, a PostgreSQL sink, a
 * coordinator; TLS everywhere) whose sink uses the same real PostgreSQL.
 *
 * The story: the first worker takes the task and is SIGSTOPped inside its transaction; its lease
 * runs out; a second worker takes the task over and moves the money; the first is resumed past its
 * lease: its transaction is refused (STALE_TOKEN, or its session was already ended by the SDK's
 * idle bound) and commits nothing; the balances are exact; the task completed once.
 *
 * Shown to fail when the fence is skipped: with E2E_SKIP_FENCE=1 the fixture's handler runs the
 * same statements in a plain transaction of the pool, and the resumed worker's transfer commits a
 * second time (alice 40 / bob 60, two transfers, instead of 70 / 30).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseCapabilitySigningKey, publicKeyEntryOf } from '@leasehold/protocol';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockfileEdges } from '../harness/lockfile-edges.js';
import { startCluster, type Cluster } from '../harness/cluster.js';
import { closePool, startPostgres, testPool, type PostgresHandle } from '../harness/postgres.js';
import { REPO_ROOT, waitFor } from '../harness/service.js';

const TTL_MS = 2_000;
const SECRETS = {
  'ledger-1': 'the-secret-of-ledger-1-in-this-test',
  'ledger-2': 'the-secret-of-ledger-2-in-this-test',
};
const SKIP_FENCE = process.env.E2E_SKIP_FENCE === '1';

let dir: string;
let project: string;
let server: PostgresHandle;
let pool: pg.Pool;
let cluster: Cluster;
/** What beforeAll started, stopped in reverse order (also when it failed half way). */
const stops: (() => Promise<void>)[] = [];
const children: ChildProcess[] = [];

function run(cmd: string, args: string[], cwd: string): string {
  try {
    return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 240_000 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leasehold-fenced-e2e-'));
  const release = join(dir, 'release');
  run('bash', [join(REPO_ROOT, 'scripts/release-pack.sh'), '--no-build', release], REPO_ROOT);
  project = join(dir, 'ledger');
  mkdirSync(project, { recursive: true });
  const tarball = (pkg: string) => `file:${join(release, `leasehold-${pkg}-0.1.0.tgz`)}`;
  // What the user installs: the worker SDK, fence-pg (its optional peer) and PostgreSQL's driver.
  const dependencies = {
    '@leasehold/worker': tarball('worker'),
    '@leasehold/fence-pg': tarball('fence-pg'),
    pg: '8.23.1',
  };
  writeFileSync(
    join(project, 'package.json'),
    JSON.stringify({ name: 'ledger', private: true, type: 'module', dependencies }),
  );
  // Our packages' dependencies on each other resolve to the tarballs, never a registry.
  const all = readdirSync(release).filter((f) => f.endsWith('.tgz'));
  writeFileSync(
    join(project, 'pnpm-workspace.yaml'),
    `overrides:\n${all.map((f) => `  "@leasehold/${basename(f).replace(/^leasehold-|-0\.1\.0\.tgz$/g, '')}": "file:${join(release, f)}"\n`).join('')}` +
      // Offline, a fresh resolution must land on versions the local store holds (pino's types
      // depend on @types/node with an open range): the workspace's one.
      '  "@types/node": "20.19.43"\n' +
      lockfileEdges(REPO_ROOT),
  );
  run('pnpm', ['install', '--offline', '--reporter=silent'], project);
  copyFileSync(join(REPO_ROOT, 'test/e2e/fixtures/fenced-ledger-worker.mjs'), join(project, 'worker.mjs'));

  server = await startPostgres();
  stops.push(() => server.stop());
  pool = testPool(server.url, 4);
  stops.push(() => closePool(pool));
  await pool.query(
    "CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL); INSERT INTO accounts VALUES ('alice', 100), ('bob', 0)",
  );
  cluster = await startCluster({
    sessionTtlMs: TTL_MS,
    sinkEnv: { LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: server.url },
    coordinatorEnv: {
      LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: Object.entries(SECRETS)
        .map(([id, secret]) => `${id}:${id}:${secret}`)
        .join(','),
    },
  });
  stops.push(() => cluster.stop());
}, 300_000);

afterAll(async () => {
  for (const child of children) {
    child.kill('SIGCONT');
    child.kill('SIGKILL');
  }
  for (const stop of stops.reverse()) await stop();
  if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined) rmSync(dir, { recursive: true, force: true });
}, 60_000);

interface Said {
  readonly e2e: string;
  readonly pid: number;
  readonly token?: string;
  readonly code?: string;
}

/** The user's worker as a process of its own, from the project; its `{"e2e": ...}` lines collected. */
function startUserWorker(workerId: keyof typeof SECRETS) {
  const child = spawn(process.execPath, ['worker.mjs'], {
    cwd: project,
    env: {
      PATH: process.env.PATH ?? '',
      COORDINATOR_URL: cluster.coordinators[0]?.url ?? '',
      SINK_URL: cluster.sink.url,
      CA_FILE: join(cluster.dir, 'pki', 'ca.crt'),
      WORKER_ID: workerId,
      WORKER_SECRET: SECRETS[workerId],
      CAPABILITY_PUBLIC_KEYS: publicKeyEntryOf(parseCapabilitySigningKey(cluster.keys.capabilitySigningKey)),
      DATABASE_URL: server.url,
      ...(SKIP_FENCE ? { E2E_SKIP_FENCE: '1' } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const said: Said[] = [];
  const out = { stderr: '' };
  let partial = '';
  child.stdout.on('data', (d: Buffer) => {
    const lines = (partial + d.toString('utf8')).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{"e2e"')) continue;
      said.push(JSON.parse(line) as Said);
    }
  });
  child.stderr.on('data', (d: Buffer) => (out.stderr += d.toString('utf8')));
  return { child, said, out };
}

async function balances(): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ id: string; balance: string }>(
    'SELECT id, balance::text AS balance FROM accounts ORDER BY id',
  );
  return Object.fromEntries(rows.map((r) => [r.id, Number(r.balance)]));
}

describe('a fenced handler from the packed tarballs', () => {
  it('first worker SIGSTOPped inside its transaction past its lease: taken over, resumed and refused, balances exact, completed once', async () => {
    const admin = cluster.admin();
    const first = startUserWorker('ledger-1');
    expect(
      (
        await admin.submit({
          taskId: 'move-1',
          resource: 'accounts/alice-bob',
          payload: { from: 'alice', to: 'bob', cents: 30 },
        })
      ).status,
    ).toBe(201);
    const inside = await waitFor('the first worker inside its transaction', () =>
      first.said.find((s) => s.e2e === 'inside'),
    );
    first.child.kill('SIGSTOP');
    const stoppedAtMs = Date.now();

    // The second worker takes the task over once the first one's lease is over, and moves the money.
    const second = startUserWorker('ledger-2');
    const done = await waitFor(
      'the task to complete',
      async () => {
        const t = (await admin.task('move-1')).body as { state: string; attempts: number };
        return t.state === 'completed' ? t : undefined;
      },
      30_000,
    );
    expect(Date.now() - stoppedAtMs).toBeGreaterThanOrEqual(TTL_MS - 500); // taken over past the lease, not before
    expect(done.attempts).toBe(2);
    expect(second.said.find((s) => s.e2e === 'written')).toBeDefined();
    expect(await balances()).toEqual({ alice: 70, bob: 30 });

    // Resumed past its lease: its transaction is refused, nothing of it commits.
    first.child.kill('SIGCONT');
    const late = await waitFor(
      'the first worker to finish its transaction',
      () => first.said.find((s) => s.e2e !== 'inside'),
      20_000,
    );
    expect(await balances()).toEqual({ alice: 70, bob: 30 });
    expect(late.e2e === 'STALE_TOKEN' || late.e2e === 'failed', JSON.stringify(late)).toBe(true);
    expect(late.token).toBe(inside.token);

    // Completed once: one `written` decision for the task's result, the second worker's, under the newer token.
    const { rows } = await pool.query<{ outcome: string; token: string; worker_id: string }>(
      `SELECT outcome, token::text AS token, worker_id FROM leasehold.decisions
        WHERE kind = 'write' AND result_id = 'task:move-1' ORDER BY seq`,
    );
    const written = rows.filter((r) => r.outcome === 'written');
    expect(written).toEqual([{ outcome: 'written', token: expect.any(String) as string, worker_id: 'ledger-2' }]);
    expect(BigInt(written[0]?.token ?? '0')).toBeGreaterThan(BigInt(inside.token ?? '0'));
    expect(await cluster.sinkClient.getResult('accounts/alice-bob', 'task:move-1')).toMatchObject({
      payload: { moved: 30 },
      workerId: 'ledger-2',
    });
    expect(((await admin.task('move-1')).body as { state: string; attempts: number }).attempts).toBe(2);
    expect(readFileSync(join(project, 'node_modules', '@leasehold', 'fence-pg', 'package.json'), 'utf8')).toMatch(
      /"version": "0\.1\.0"/,
    );
  }, 120_000);
});
