/**
 * Sink benchmark, three figures measured in one run on the same machine (loopback only):
 *
 *   A. durable fenced writes/s over HTTP: the built sink (`dist/main.js`, synchronous=FULL, group
 *      commit) as its own process, 100 keep-alive connections, each writing new results to its own
 *      resource with a valid capability (every write is `written`, fsynced before its ack);
 *   B. a bare fastify hello-world (GET /) as its own process, same load generator and connections;
 *   C. in-process SQLite, one write per transaction (synchronous=FULL, no HTTP, no batching).
 *
 * Rows: A vs B (target >= 0.6x) and A vs C (what group commit buys over one fsync per write).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signCapability, type CapabilityKey } from '@leasehold/protocol';
import { SqliteFenceStore } from '../store/sqlite-store.js';
import { runLoad, type LoadResult } from './load.js';

export interface BenchRow {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly baseline: number | null;
  readonly ratio: number | null;
  readonly target: number | null;
  readonly met: boolean | null;
}

export interface SinkBenchOptions {
  /** Measured seconds per figure (after a 2 s warm-up per round). Default 12. */
  readonly seconds?: number;
  /**
   * The HTTP figures are measured in this many alternating rounds (sink, hello, sink, hello, ...)
   * and summed, so a load swing on a shared machine hits both sides alike. Default 3.
   */
  readonly rounds?: number;
  readonly connections?: number;
  readonly log?: (line: string) => void;
}

const MAIN_JS = fileURLToPath(new URL('../main.js', import.meta.url));
const HELLO_JS = fileURLToPath(new URL('./hello-server.js', import.meta.url));
const COORDINATOR_KEY = 'bench-coordinator-key-000000001';
const CAPABILITY_KEY: CapabilityKey = { id: 'bench', secret: 'bench-capability-secret-000001' };

async function waitFor(check: () => number | undefined, proc: ChildProcess, what: string): Promise<number> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode}`);
    if (Date.now() > deadline) throw new Error(`${what} did not start`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null) return;
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  proc.kill('SIGTERM');
  await exited;
}

export async function measureHello(seconds: number, connections: number): Promise<LoadResult> {
  const proc = spawn(process.execPath, [HELLO_JS], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  proc.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  try {
    const port = await waitFor(
      () => (out.includes('\n') ? (JSON.parse(out) as { port: number }).port : undefined),
      proc,
      'hello server',
    );
    const request = { method: 'GET' as const, path: '/' };
    return await runLoad({ port, connections, durationMs: seconds * 1000, warmupMs: 2000, next: () => request });
  } finally {
    await stop(proc);
  }
}

export async function measureSink(seconds: number, connections: number, dir: string, env: Record<string, string> = {}) {
  const portFile = join(dir, 'port');
  const proc = spawn(process.execPath, [MAIN_JS, '--port', '0', '--port-file', portFile], {
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      PATH: process.env.PATH ?? '',
      LEASEHOLD_SINK_DB_PATH: join(dir, 'bench.db'),
      LEASEHOLD_SINK_SYNCHRONOUS: 'FULL',
      LEASEHOLD_SINK_LOG_LEVEL: 'error',
      LEASEHOLD_SINK_COORDINATOR_KEYS: COORDINATOR_KEY,
      LEASEHOLD_SINK_CAPABILITY_KEYS: `${CAPABILITY_KEY.id}:${CAPABILITY_KEY.secret}`,
      ...env,
    },
  });
  try {
    const port = await waitFor(
      () => (existsSync(portFile) ? Number(readFileSync(portFile, 'utf8')) : undefined),
      proc,
      'sink',
    );
    const auth = { authorization: `Bearer ${COORDINATOR_KEY}` };
    const items = Array.from({ length: connections }, (_, lane) => ({ resource: `bench/r${lane}`, token: '1' }));
    const setup = await runLoad({
      port,
      connections: 1,
      durationMs: 1,
      warmupMs: 0,
      next: () => ({
        method: 'POST',
        path: '/v1/fences/advance-batch',
        headers: auth,
        body: Buffer.from(JSON.stringify({ items })),
      }),
    });
    if (setup.failed > 0) throw new Error('could not advance the bench resources');
    const lanes = items.map((item, lane) => {
      const capability = signCapability(CAPABILITY_KEY, {
        resource: item.resource,
        token: 1n,
        workerId: `worker-${lane}`,
        incarnation: 'bench',
      });
      return { resource: item.resource, workerId: `worker-${lane}`, capability };
    });
    const load = await runLoad({
      port,
      connections,
      durationMs: seconds * 1000,
      warmupMs: 2000,
      next: (lane, n) => {
        const l = lanes[lane] ?? lanes[0];
        const body = {
          resource: l?.resource,
          token: '1',
          resultId: `result-${n}`,
          workerId: l?.workerId,
          incarnation: 'bench',
          capability: l?.capability,
          payload: { lane, n, status: 'done', output: 'abcdefghijklmnopqrstuvwxyz012345' },
        };
        return { method: 'POST', path: '/v1/writes', body: Buffer.from(JSON.stringify(body)) };
      },
    });
    const metrics = await fetchText(port, '/metrics');
    return {
      load,
      meanBatch: histogramMean(metrics, 'leasehold_sink_batch_ops'),
      commitMs: 1000 * histogramMean(metrics, 'leasehold_sink_commit_seconds'),
    };
  } finally {
    await stop(proc);
  }
}

async function fetchText(port: number, path: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return res.text();
}

function histogramMean(text: string, name: string): number {
  const sum = new RegExp(`^${name}_sum (\\S+)$`, 'm').exec(text)?.[1];
  const count = new RegExp(`^${name}_count (\\S+)$`, 'm').exec(text)?.[1];
  return sum !== undefined && count !== undefined && Number(count) > 0 ? Number(sum) / Number(count) : 0;
}

export async function measureInProcess(seconds: number, dir: string): Promise<number> {
  const store = new SqliteFenceStore({ path: join(dir, 'inproc.db'), synchronous: 'FULL' });
  try {
    await store.applyBatch([{ kind: 'advance', resource: 'bench/r', token: 1n }]);
    const end = performance.now() + seconds * 1000;
    let n = 0;
    while (performance.now() < end) {
      const payload = JSON.stringify({ n, status: 'done', output: 'abcdefghijklmnopqrstuvwxyz012345' });
      await store.applyBatch([
        { kind: 'write', resource: 'bench/r', token: 1n, resultId: `r-${n}`, workerId: 'w', payload },
      ]);
      n++;
    }
    return n / seconds;
  } finally {
    await store.close();
  }
}

const round = (x: number, digits = 0) => Number(x.toFixed(digits));

function combine(results: readonly LoadResult[]): LoadResult {
  const ok = results.reduce((a, r) => a + r.ok, 0);
  const seconds = results.reduce((a, r) => a + r.seconds, 0);
  const mean = (f: (r: LoadResult) => number) => results.reduce((a, r) => a + f(r), 0) / Math.max(1, results.length);
  return {
    ok,
    failed: results.reduce((a, r) => a + r.failed, 0),
    seconds,
    perSecond: seconds > 0 ? ok / seconds : 0,
    p50Ms: mean((r) => r.p50Ms),
    p99Ms: mean((r) => r.p99Ms),
  };
}

export async function runSinkBench(options: SinkBenchOptions = {}): Promise<BenchRow[]> {
  const seconds = options.seconds ?? 12;
  const rounds = Math.max(1, options.rounds ?? 3);
  const connections = options.connections ?? 100;
  const log = options.log ?? (() => undefined);
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-sink-bench-'));
  try {
    const perRound = seconds / rounds;
    const sinkRounds: Awaited<ReturnType<typeof measureSink>>[] = [];
    const helloRounds: LoadResult[] = [];
    for (let round = 1; round <= rounds; round++) {
      log(`round ${round}/${rounds}: sink, durable writes over HTTP, ${connections} connections, ${perRound} s`);
      const roundDir = mkdtempSync(join(dir, 'round-'));
      sinkRounds.push(await measureSink(perRound, connections, roundDir));
      log(`round ${round}/${rounds}: fastify hello-world, ${connections} connections, ${perRound} s`);
      helloRounds.push(await measureHello(perRound, connections));
      log(
        `round ${round}: sink ${Math.round(sinkRounds.at(-1)?.load.perSecond ?? 0)}/s, ` +
          `hello ${Math.round(helloRounds.at(-1)?.perSecond ?? 0)}/s`,
      );
    }
    log(`in-process SQLite, one write per transaction, ${seconds} s`);
    const inProcess = await measureInProcess(seconds, dir);
    const sinkLoad = combine(sinkRounds.map((r) => r.load));
    const hello = combine(helloRounds);
    const sink = {
      load: sinkLoad,
      meanBatch: sinkRounds.reduce((a, r) => a + r.meanBatch, 0) / rounds,
      commitMs: sinkRounds.reduce((a, r) => a + r.commitMs, 0) / rounds,
    };
    const sinkRate = sink.load.perSecond;
    const vsHello = sinkRate / hello.perSecond;
    return [
      {
        name: 'sink.http_durable_writes_vs_fastify_hello',
        value: round(sinkRate),
        unit: 'writes/s',
        baseline: round(hello.perSecond),
        ratio: round(vsHello, 2),
        target: 0.6,
        met: vsHello >= 0.6,
      },
      {
        name: 'sink.http_durable_writes_vs_inprocess_txn_per_write',
        value: round(sinkRate),
        unit: 'writes/s',
        baseline: round(inProcess),
        ratio: round(sinkRate / inProcess, 2),
        target: null,
        met: null,
      },
      {
        name: 'sink.http_write_latency_p50',
        value: round(sink.load.p50Ms, 2),
        unit: 'ms',
        baseline: round(hello.p50Ms, 2),
        ratio: null,
        target: null,
        met: null,
      },
      {
        name: 'sink.http_write_latency_p99',
        value: round(sink.load.p99Ms, 2),
        unit: 'ms',
        baseline: round(hello.p99Ms, 2),
        ratio: null,
        target: null,
        met: null,
      },
      {
        name: 'sink.group_commit_mean_batch',
        value: round(sink.meanBatch, 1),
        unit: 'ops/commit',
        baseline: null,
        ratio: null,
        target: null,
        met: null,
      },
      {
        name: 'sink.group_commit_mean_commit',
        value: round(sink.commitMs, 3),
        unit: 'ms',
        baseline: null,
        ratio: null,
        target: null,
        met: null,
      },
      {
        name: 'sink.http_failed_requests',
        value: sink.load.failed,
        unit: 'requests',
        baseline: null,
        ratio: null,
        target: 0,
        met: sink.load.failed === 0,
      },
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function formatBenchTable(rows: readonly BenchRow[]): string {
  const cell = (v: number | boolean | null) => (v === null ? '' : String(v));
  const lines = [
    '| figure | value | unit | baseline | ratio | target | met |',
    '| --- | ---: | --- | ---: | ---: | ---: | --- |',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.value} | ${r.unit} | ${cell(r.baseline)} | ${cell(r.ratio)} | ${cell(r.target)} | ${cell(r.met)} |`,
    ),
  ];
  return lines.join('\n');
}
