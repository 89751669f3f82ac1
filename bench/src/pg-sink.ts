/**
 * PostgreSQL benchmark (`pnpm bench --only pg`), on a throwaway cluster started for the suite
 * (@leasehold/devkit `startLocalPostgres`: initdb + pg_ctl, fsync=on, synchronous_commit=on), all on
 * loopback, each figure measured in alternating rounds with its baseline:
 *
 *   A. durable fenced writes/s through the PostgreSQL sink over HTTP: the built sink
 *      (`--store postgres`) as its own process, `connections` keep-alive connections, each writing
 *      new results to its own resource with a valid capability (every write `written`, acked after
 *      COMMIT);
 *   A'. the same writes through the sink's FencedService + PostgresFenceStore in this process (no
 *      HTTP), at the same concurrency;
 *   B. baseline: plain single-row INSERTs, one per transaction (autocommit, synchronous_commit=on),
 *      `connections` concurrent node-postgres connections — the same client library the sink uses.
 *      Target: A >= 1.5x B (group commit: one transaction per batch).
 *   C. fencedTransaction latency, one caller at a time: lock the fence, the user's UPDATE, store the
 *      result under a new result id, log the decision, COMMIT — vs the same UPDATE in a plain
 *      BEGIN/UPDATE/COMMIT from the same pool. Target: p50 <= 1.3x.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalPostgres } from '@leasehold/devkit';
import { fencedTransaction } from '@leasehold/fence-pg';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  publicKeysOf,
  signCapability,
} from '@leasehold/protocol';
import { FencedService, PostgresFenceStore } from '@leasehold/sink';
import pg from 'pg';
import pino from 'pino';
import { SINK_MAIN } from './infra/stack.js';
import { runLoad, type LoadResult } from './load.js';
import { limitRow, percentile, ratioRow, round, type BenchRow } from './report.js';

export interface PgBenchOptions {
  /** Measured seconds per figure per round (after a 1 s warm-up). */
  readonly seconds: number;
  readonly rounds: number;
  readonly connections?: number;
  readonly log?: (line: string) => void;
}

const COORDINATOR_KEY = 'bench-coordinator-key-000000001';
const CAPABILITY_KEY = parseCapabilitySigningKey(`bench:${generateCapabilitySeed(randomBytes)}`);
const PAYLOAD = { status: 'done', output: 'abcdefghijklmnopqrstuvwxyz012345' };

async function resetDatabase(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS leasehold CASCADE;
      DROP TABLE IF EXISTS bench_plain; DROP TABLE IF EXISTS bench_accounts;
      CREATE TABLE bench_plain (id bigserial PRIMARY KEY, lane int NOT NULL, n int NOT NULL, payload text NOT NULL);
      CREATE TABLE bench_accounts (id text PRIMARY KEY, balance bigint NOT NULL);
      INSERT INTO bench_accounts VALUES ('a', 0);
      CHECKPOINT;`);
  } finally {
    await client.end();
  }
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  await exited;
}

/** A: the built sink process on PostgreSQL, HTTP load. */
type SinkLoad = LoadResult & { readonly meanBatch: number; readonly commitMs: number };

function histogramMean(text: string, name: string): number {
  const sum = new RegExp(`^${name}_sum (\\S+)$`, 'm').exec(text)?.[1];
  const count = new RegExp(`^${name}_count (\\S+)$`, 'm').exec(text)?.[1];
  return sum !== undefined && count !== undefined && Number(count) > 0 ? Number(sum) / Number(count) : 0;
}

async function measureSinkHttp(url: string, seconds: number, connections: number, dir: string): Promise<SinkLoad> {
  const portFile = join(dir, `port-${Date.now()}`);
  const proc = spawn(process.execPath, [SINK_MAIN, '--port', '0', '--port-file', portFile], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      PATH: process.env.PATH ?? '',
      LEASEHOLD_SINK_STORE: 'postgres',
      LEASEHOLD_SINK_DATABASE_URL: url,
      LEASEHOLD_SINK_LOG_LEVEL: 'error',
      LEASEHOLD_SINK_COORDINATOR_KEYS: COORDINATOR_KEY,
      LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: publicKeyEntryOf(CAPABILITY_KEY),
    },
  });
  try {
    const deadline = Date.now() + 15_000;
    while (!existsSync(portFile)) {
      if (proc.exitCode !== null) throw new Error(`sink exited with ${proc.exitCode}`);
      if (Date.now() > deadline) throw new Error('sink did not start');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const port = Number(readFileSync(portFile, 'utf8'));
    const items = Array.from({ length: connections }, (_, lane) => ({ resource: `bench/r${lane}`, token: '1' }));
    const setup = await runLoad({
      port,
      connections: 1,
      durationMs: 1,
      warmupMs: 0,
      next: () => ({
        method: 'POST',
        path: '/v1/fences/advance-batch',
        headers: { authorization: `Bearer ${COORDINATOR_KEY}` },
        body: Buffer.from(JSON.stringify({ items })),
      }),
    });
    if (setup.failed > 0) throw new Error('could not advance the bench resources');
    const lanes = items.map((item, lane) => ({
      resource: item.resource,
      workerId: `worker-${lane}`,
      capability: signCapability(CAPABILITY_KEY, {
        resource: item.resource,
        token: 1n,
        workerId: `worker-${lane}`,
        incarnation: 'bench',
      }),
    }));
    const result = await runLoad({
      port,
      connections,
      durationMs: seconds * 1000,
      warmupMs: 1000,
      next: (lane, n) => {
        const l = lanes[lane] ?? lanes[0];
        const body = {
          resource: l?.resource,
          token: '1',
          resultId: `result-${n}`,
          workerId: l?.workerId,
          incarnation: 'bench',
          capability: l?.capability,
          payload: { lane, n, ...PAYLOAD },
        };
        return { method: 'POST', path: '/v1/writes', body: Buffer.from(JSON.stringify(body)) };
      },
    });
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return {
      ...result,
      meanBatch: histogramMean(metrics, 'leasehold_sink_batch_ops'),
      commitMs: 1000 * histogramMean(metrics, 'leasehold_sink_commit_seconds'),
    };
  } finally {
    await stop(proc);
  }
}

/** Closed-loop lanes for `seconds` after a 1 s warm-up; returns completed operations per second. */
async function lanesPerSecond(
  seconds: number,
  connections: number,
  op: (lane: number, n: number) => Promise<void>,
): Promise<number> {
  const start = performance.now();
  const measureFrom = start + 1000;
  const end = measureFrom + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: connections }, async (_, lane) => {
      for (let n = 0; performance.now() < end; n++) {
        const sentAt = performance.now();
        await op(lane, n);
        if (sentAt >= measureFrom && performance.now() <= end) done++;
      }
    }),
  );
  return done / seconds;
}

/** A': FencedService over PostgresFenceStore in this process. */
async function measureInProcess(url: string, seconds: number, connections: number): Promise<number> {
  const store = await PostgresFenceStore.open({ url, applicationName: 'bench-inprocess' });
  const service = new FencedService({ store, logger: pino({ level: 'silent' }) });
  try {
    await service.advanceBatch(
      Array.from({ length: connections }, (_, lane) => ({ resource: `in/r${lane}`, token: 1n })),
    );
    return await lanesPerSecond(seconds, connections, async (lane, n) => {
      const d = await service.write({
        resource: `in/r${lane}`,
        token: 1n,
        resultId: `result-${n}`,
        workerId: `worker-${lane}`,
        payload: { lane, n, ...PAYLOAD },
      });
      if (!d.ok) throw new Error(`bench write refused: ${d.code}`);
    });
  } finally {
    await service.close();
    await store.close();
  }
}

/** B: one INSERT per transaction, `connections` concurrent connections. */
async function measurePlainInserts(url: string, seconds: number, connections: number): Promise<number> {
  const pool = new pg.Pool({ connectionString: url, max: connections, options: '-c synchronous_commit=on' });
  // end() does not wait for the connections to close: a server stopped right after sends a closing one
  // a FATAL 57P01, which a pool without a listener throws as an uncaught error.
  pool.on('error', () => undefined);
  try {
    return await lanesPerSecond(seconds, connections, async (lane, n) => {
      await pool.query('INSERT INTO bench_plain (lane, n, payload) VALUES ($1, $2, $3)', [
        lane,
        n,
        JSON.stringify({ lane, n, ...PAYLOAD }),
      ]);
    });
  } finally {
    await pool.end();
  }
}

/** C: p50 of a plain transaction and of the same work in fencedTransaction, one caller, interleaved blocks. */
async function measureLatency(url: string, seconds: number): Promise<{ plain: number[]; fenced: number[] }> {
  const pool = new pg.Pool({ connectionString: url, max: 2, options: '-c synchronous_commit=on' });
  pool.on('error', () => undefined); // (see measurePlainInserts)
  const store = await PostgresFenceStore.open({ url, applicationName: 'bench-advance' });
  const resource = 'bench/account-a';
  const capability = signCapability(CAPABILITY_KEY, { resource, token: 1n, workerId: 'w', incarnation: 'bench' });
  const plain: number[] = [];
  const fenced: number[] = [];
  try {
    await store.applyBatch([{ kind: 'advance', resource, token: 1n }]);
    const update = "UPDATE bench_accounts SET balance = balance + 1 WHERE id = 'a'";
    const end = performance.now() + seconds * 1000;
    for (let n = 0; performance.now() < end; n++) {
      const t0 = performance.now();
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        await client.query(update);
        await client.query('COMMIT');
      } finally {
        client.release();
      }
      const t1 = performance.now();
      const outcome = await fencedTransaction(
        pool,
        {
          resource,
          token: 1n,
          capability,
          workerId: 'w',
          incarnation: 'bench',
          resultId: `deposit-${n}`,
          capabilityPublicKeys: publicKeysOf(CAPABILITY_KEY),
        },
        async (c) => {
          await c.query(update);
          return { deposited: 1 };
        },
      );
      const t2 = performance.now();
      if (!outcome.ok) throw new Error(`bench fenced transaction refused: ${outcome.code}`);
      if (n >= 50) {
        plain.push(t1 - t0);
        fenced.push(t2 - t1);
      }
    }
    return { plain, fenced };
  } finally {
    await store.close();
    await pool.end();
  }
}

export async function runPgSinkBench(options: PgBenchOptions): Promise<BenchRow[]> {
  const connections = options.connections ?? 64;
  const log = options.log ?? (() => undefined);
  const rounds = Math.max(1, options.rounds);
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-pg-bench-'));
  const cluster = await startLocalPostgres({ settings: { max_connections: String(connections * 2 + 20) } });
  try {
    const admin = new pg.Client({ connectionString: cluster.adminUrl });
    await admin.connect();
    await admin.query('CREATE DATABASE bench');
    await admin.end();
    const url = cluster.adminUrl.replace(/\/postgres$/, '/bench');
    const http: SinkLoad[] = [];
    const inProcess: number[] = [];
    const plain: number[] = [];
    const plainLatency: number[] = [];
    const fencedLatency: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      await resetDatabase(url);
      http.push(await measureSinkHttp(url, options.seconds, connections, dir));
      await resetDatabase(url);
      plain.push(await measurePlainInserts(url, options.seconds, connections));
      await resetDatabase(url);
      inProcess.push(await measureInProcess(url, options.seconds, connections));
      await resetDatabase(url);
      const latency = await measureLatency(url, options.seconds);
      plainLatency.push(...latency.plain);
      fencedLatency.push(...latency.fenced);
      log(
        `pg round ${r}/${rounds}: sink HTTP ${Math.round(http.at(-1)?.perSecond ?? 0)}/s, in-process ${Math.round(
          inProcess.at(-1) ?? 0,
        )}/s, plain INSERT ${Math.round(plain.at(-1) ?? 0)}/s; txn p50 plain ${round(
          percentile(
            [...latency.plain].sort((a, b) => a - b),
            50,
          ),
          2,
        )} ms, fenced ${round(
          percentile(
            [...latency.fenced].sort((a, b) => a - b),
            50,
          ),
          2,
        )} ms`,
      );
    }
    const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    const httpPerSecond = mean(http.map((x) => x.perSecond));
    const plainPerSecond = mean(plain);
    plainLatency.sort((a, b) => a - b);
    fencedLatency.sort((a, b) => a - b);
    const plainP50 = percentile(plainLatency, 50);
    const fencedP50 = percentile(fencedLatency, 50);
    const ratio = plainP50 > 0 ? fencedP50 / plainP50 : 0;
    const baselineName = `plain 1-row INSERT per txn (synchronous_commit=on), ${connections} pg conns`;
    return [
      ratioRow({
        name: 'pg sink durable fenced writes/s over HTTP',
        value: httpPerSecond,
        unit: 'writes/s',
        baseline: plainPerSecond,
        baselineName,
        target: 1.5,
        note: `${connections} HTTP conns to one sink process (pool 4, pipelined), mean group commit ${round(mean(http.map((x) => x.meanBatch)), 1)} writes / ${round(mean(http.map((x) => x.commitMs)), 2)} ms; p99 ${round(mean(http.map((x) => x.p99Ms)), 2)} ms; failed ${http.reduce((a, x) => a + x.failed, 0)}`,
      }),
      ratioRow({
        name: 'pg sink durable fenced writes/s in process (FencedService)',
        value: mean(inProcess),
        unit: 'writes/s',
        baseline: plainPerSecond,
        baselineName,
        target: 1.5,
      }),
      {
        name: 'fencedTransaction p50 latency (1 caller)',
        value: round(fencedP50, 3),
        unit: 'ms',
        baseline: round(plainP50, 3),
        baselineName: 'same UPDATE in BEGIN/UPDATE/COMMIT, same pool',
        ratio: round(ratio, 2),
        ratioMin: null,
        ratioMax: null,
        cpuPerOp: null,
        baselineCpuPerOp: null,
        target: 1.3,
        targetKind: 'ratio<=',
        clearsTarget: ratio <= 1.3,
        met: ratio <= 1.3,
        note: `p99 fenced ${round(percentile(fencedLatency, 99), 2)} ms vs plain ${round(percentile(plainLatency, 99), 2)} ms; ${fencedLatency.length} samples each`,
      },
      limitRow({
        name: 'pg sink failed writes',
        value: http.reduce((a, x) => a + x.failed, 0),
        unit: 'requests',
        limit: 0,
        digits: 0,
      }),
    ];
  } finally {
    await cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
