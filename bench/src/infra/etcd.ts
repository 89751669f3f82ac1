/**
 * One etcd member for the bench, as the test harness starts it: the `etcd` binary (ETCD_BIN or on
 * PATH) on free loopback ports with a temp data dir and `--election-timeout 100
 * --heartbeat-interval 10` (so sub-second session TTLs are allowed). LEASEHOLD_ETCD_ENDPOINTS is
 * NOT honoured: the bench must read the etcd process' CPU and memory from /proc.
 */
import { spawn, spawnSync } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { Etcd3 } from 'etcd3';
import { freePort, sleep, stopChild, track } from './daemon.js';

export interface Etcd {
  readonly endpoint: string;
  readonly pid: number;
  readonly version: string;
  stop(): Promise<void>;
}

export function findEtcd(): string {
  const explicit = process.env.ETCD_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    try {
      accessSync(join(dir, 'etcd'), constants.X_OK);
      return join(dir, 'etcd');
    } catch {
      // not here
    }
  }
  throw new Error('etcd not found: install etcd-server (pnpm bootstrap does) or set ETCD_BIN');
}

export function etcdVersion(bin = findEtcd()): string {
  const out = spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout;
  return /etcd Version: (\S+)/.exec(out)?.[1] ?? 'unknown';
}

export interface EtcdOptions {
  /** Extra flags (e.g. the scale suite's `--quota-backend-bytes` and auto-compaction). */
  readonly args?: readonly string[];
}

export async function startEtcd(options: EtcdOptions = {}): Promise<Etcd> {
  const bin = findEtcd();
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-bench-etcd-'));
  const clientPort = await freePort();
  const peerPort = await freePort();
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  const child = spawn(
    bin,
    [
      '--name', 'bench',
      '--data-dir', join(dir, 'data'),
      '--listen-client-urls', clientUrl,
      '--advertise-client-urls', clientUrl,
      '--listen-peer-urls', peerUrl,
      '--initial-advertise-peer-urls', peerUrl,
      '--initial-cluster', `bench=${peerUrl}`,
      '--initial-cluster-state', 'new',
      '--election-timeout', '100',
      '--heartbeat-interval', '10',
      '--log-level', 'error',
      '--logger', 'zap',
      ...(options.args ?? []),
      ...(process.env.LEASEHOLD_BENCH_ETCD_ARGS ?? '').split(' ').filter((a) => a !== ''),
    ], // prettier-ignore
    { detached: true, stdio: ['ignore', 'ignore', 'ignore'] },
  );
  track(child);
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(1_000) });
      if (((await res.json()) as { health?: string }).health === 'true') break;
    } catch {
      // not yet
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      await stopChild(child);
      throw new Error('etcd did not become healthy');
    }
    await sleep(50);
  }
  return {
    endpoint: clientUrl,
    pid: child.pid ?? 0,
    version: etcdVersion(bin),
    stop: async () => {
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Compact `etcd` (physically) to its current revision, after a short pause so watchers catch up.
 * Between measured rounds only: after a mass delete (a lease revoke of the raw-txn baseline's ~25k
 * keys, or releasing every held grant) etcd 3.4 answers later txns ~3.7x slower until compaction
 * (measured: 5.5k -> 1.5k raw txns/s, 0.11 -> 0.9 ms etcd CPU per txn; back to 5.2k after a
 * compaction). Production etcd runs with auto-compaction; so does the bench, between rounds.
 */
export async function compactEtcd(etcd: Etcd): Promise<void> {
  const client = new Etcd3({ hosts: [etcd.endpoint] });
  try {
    await sleep(200);
    // A write first: compacting twice at one revision (nothing written in between) is an error.
    const revision = (await client.put('leasehold-bench-compact').value('x').exec()).header.revision;
    await client.kv.compact({ revision, physical: true });
  } finally {
    client.close();
  }
}

/** From etcd's own /metrics: backend size, live keys and revision (what a window ran against). */
export async function etcdState(etcd: Etcd): Promise<{ dbMiB: number; keys: number; revision: number }> {
  try {
    const text = await (await fetch(`${etcd.endpoint}/metrics`, { signal: AbortSignal.timeout(2_000) })).text();
    const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    return {
      dbMiB: Math.round((read('etcd_mvcc_db_total_size_in_bytes') / 1024 / 1024) * 10) / 10,
      keys: read('etcd_debugging_mvcc_keys_total'),
      revision: read('etcd_debugging_mvcc_current_revision'),
    };
  } catch {
    return { dbMiB: Number.NaN, keys: Number.NaN, revision: Number.NaN };
  }
}

/** etcd's backend file size and the part of it in use (bytes), from its /metrics. */
export interface EtcdDbSize {
  readonly totalBytes: number;
  readonly inUseBytes: number;
  readonly keys: number;
  readonly revision: number;
}

export async function etcdDbSize(etcd: Etcd): Promise<EtcdDbSize> {
  const text = await (await fetch(`${etcd.endpoint}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return {
    totalBytes: read('etcd_mvcc_db_total_size_in_bytes'),
    inUseBytes: read('etcd_mvcc_db_total_size_in_use_in_bytes'),
    keys: read('etcd_debugging_mvcc_keys_total'),
    revision: read('etcd_debugging_mvcc_current_revision'),
  };
}

/**
 * Compact to the current revision, then defragment (the backend file shrinks to what is in use).
 * Defragmenting a large backend blocks the member for seconds: setup only, never inside a window.
 */
export async function compactAndDefragEtcd(etcd: Etcd): Promise<void> {
  await compactEtcd(etcd);
  const client = new Etcd3({ hosts: [etcd.endpoint] });
  try {
    await client.maintenance.defragment({ deadline: Date.now() + 600_000 });
  } finally {
    client.close();
  }
}
