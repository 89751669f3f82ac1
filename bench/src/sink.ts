/**
 * Sink benchmark, three figures measured in one run on the same machine (loopback only):
 *
 *   A. durable fenced writes/s over HTTP: the built sink (`dist/main.js`, synchronous=FULL, group
 *      commit) as its own process, 100 keep-alive connections, each writing new results to its own
 *      resource with a valid capability (every write is `written`, fsynced before its ack);
 *   B. a bare fastify hello-world (GET /) as its own process, same load generator and connections;
 *   C. in-process SQLite, one write per transaction (synchronous=FULL, no HTTP, no batching).
 *
 * Rows: A vs B (target >= 0.6x) and A vs C (what group commit buys over one fsync per write), the
 * sink's resident memory under that load (VmRSS, peak of samples every 250 ms) next to the hello
 * server's. All three are measured in alternating rounds (A, B, C, A, B, C, ...).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { signCapability, type CapabilityKey } from '@leasehold/protocol';
import { SqliteFenceStore } from '@leasehold/sink';
import { rssBytes } from './infra/proc.js';
import { profileArgs, SINK_MAIN } from './infra/stack.js';
import { runLoad, type LoadResult } from './load.js';
import { limitRow, ratioRow, round, type BenchRow } from './report.js';

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

const MAIN_JS = SINK_MAIN;
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

/** Peak VmRSS of `pid` while `run` runs, sampled every 250 ms. */
async function peakRss<T>(pid: number | undefined, run: () => Promise<T>): Promise<{ result: T; rss: number }> {
  let peak = 0;
  const sample = () => {
    peak = Math.max(peak, pid === undefined ? 0 : (rssBytes(pid) ?? 0));
  };
  const timer = setInterval(sample, 250);
  try {
    const result = await run();
    sample();
    return { result, rss: peak };
  } finally {
    clearInterval(timer);
  }
}

export async function measureHello(seconds: number, connections: number): Promise<{ load: LoadResult; rss: number }> {
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
    const { result: load, rss } = await peakRss(proc.pid, () =>
      runLoad({ port, connections, durationMs: seconds * 1000, warmupMs: 2000, next: () => request }),
    );
    return { load, rss };
  } finally {
    await stop(proc);
  }
}

export async function measureSink(seconds: number, connections: number, dir: string, env: Record<string, string> = {}) {
  const portFile = join(dir, 'port');
  const proc = spawn(
    process.execPath,
    [...profileArgs('sink', 'sink'), MAIN_JS, '--port', '0', '--port-file', portFile],
    {
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
    },
  );
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
    const { result: load, rss } = await peakRss(proc.pid, () =>
      runLoad({
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
      }),
    );
    const metrics = await fetchText(port, '/metrics');
    return {
      load,
      rss,
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

function combine(results: readonly LoadResult[]): LoadResult {
  const ok = results.reduce((a, r) => a + r.ok, 0);
  const seconds = results.reduce((a, r) => a + r.seconds, 0);
  const avg = (f: (r: LoadResult) => number) => results.reduce((a, r) => a + f(r), 0) / Math.max(1, results.length);
  return {
    ok,
    failed: results.reduce((a, r) => a + r.failed, 0),
    seconds,
    perSecond: seconds > 0 ? ok / seconds : 0,
    p50Ms: avg((r) => r.p50Ms),
    p99Ms: avg((r) => r.p99Ms),
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
    const helloRounds: Awaited<ReturnType<typeof measureHello>>[] = [];
    const inProcessRounds: number[] = [];
    for (let r = 1; r <= rounds; r++) {
      const roundDir = mkdtempSync(join(dir, 'round-'));
      sinkRounds.push(await measureSink(perRound, connections, roundDir));
      helloRounds.push(await measureHello(perRound, connections));
      inProcessRounds.push(await measureInProcess(perRound, roundDir));
      log(
        `sink round ${r}/${rounds}: sink ${Math.round(sinkRounds.at(-1)?.load.perSecond ?? 0)}/s, ` +
          `hello ${Math.round(helloRounds.at(-1)?.load.perSecond ?? 0)}/s, ` +
          `in-process ${Math.round(inProcessRounds.at(-1) ?? 0)}/s`,
      );
    }
    const sink = combine(sinkRounds.map((x) => x.load));
    const hello = combine(helloRounds.map((x) => x.load));
    const inProcess = inProcessRounds.reduce((a, b) => a + b, 0) / rounds;
    const meanBatch = sinkRounds.reduce((a, x) => a + x.meanBatch, 0) / rounds;
    const commitMs = sinkRounds.reduce((a, x) => a + x.commitMs, 0) / rounds;
    const mib = (b: number) => b / 1024 / 1024;
    const ctx = `${connections} conns, synchronous=FULL, mean group commit ${round(meanBatch, 1)} writes / ${round(commitMs, 2)} ms`;
    return [
      ratioRow({
        name: 'sink durable fenced writes/s over HTTP',
        value: sink.perSecond,
        unit: 'writes/s',
        baseline: hello.perSecond,
        baselineName: `fastify hello-world GET, ${connections} conns`,
        target: 0.6,
        note: ctx,
      }),
      ratioRow({
        name: 'sink durable fenced writes/s over HTTP',
        value: sink.perSecond,
        unit: 'writes/s',
        baseline: inProcess,
        baselineName: 'in-process SQLite, 1 write per txn (FULL)',
      }),
      limitRow({
        name: 'sink write latency p99 (HTTP, under load)',
        value: sink.p99Ms,
        unit: 'ms',
        baseline: hello.p99Ms,
        baselineName: 'fastify hello-world p99',
        digits: 2,
      }),
      limitRow({
        name: 'sink failed writes',
        value: sink.failed,
        unit: 'requests',
        limit: 0,
        digits: 0,
      }),
      limitRow({
        name: 'sink RSS under write load (peak)',
        value: mib(Math.max(...sinkRounds.map((x) => x.rss))),
        unit: 'MiB',
        baseline: mib(Math.max(...helloRounds.map((x) => x.rss))),
        baselineName: 'fastify hello-world RSS under load',
      }),
    ];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
