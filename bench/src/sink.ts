/**
 * Suite `sink`: the fenced write target under HTTP load from a separate process.
 *
 * Sides, interleaved round by round (write 200 B, write 4 KiB, hello, write 200 B, …), each server
 * started once and warmed up (checked), each load generator (autocannon, `procs/http-load.ts`) its
 * own process with `connections` keep-alive connections:
 *   - `write-200`, `write-4k`: the built sink (synchronous=FULL, group commit, SQLite in its worker
 *     thread) taking POST /v1/writes; every write is a fresh grant — a resource the load generator
 *     advanced to a new token before the round, vouching for the capability signed for it as the
 *     coordinator does (so its one write finds it in the sink's cache, never verified before), a new
 *     result id — with a result of ~200 B or ~4 KiB; every write is `written`, fsynced before its ack;
 *   - `write-200-batch8`: the same 200 B writes, 8 to a POST /v1/writes/batch request (as the SDK
 *     sends them: `@leasehold/sink-client` group-commits writes), each item still a fresh grant;
 *   - `hello`: a bare fastify hello-world process (GET /);
 *   - `post-echo`: the same process taking POST / with one body shaped as a lone 200 B write, parsed
 *     and four of its fields answered: what a request with a body costs fastify, no sink logic.
 * Rows: writes/s vs hello requests/s, and the sink's CPU per durable write vs hello's CPU per
 * request (target ≤ 2.5× for lone 200 B writes), both from /proc of each server process; the lone
 * write's CPU vs the POST echo's (no target: the sink's own cost above fastify's for a body); p99
 * latency; failed writes (refused requests, and refused items of batches from the sink's own
 * counters); peak RSS.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCapabilitySeed } from '@leasehold/protocol';
import { NodeChild, type ChildMessage } from './infra/child.js';
import { startNodeDaemon, type NodeDaemon } from './infra/daemon.js';
import { pinToCpus, rssBytes } from './infra/proc.js';
import { startSinkProcess, type StackKeys } from './infra/stack.js';
import { interleaveLoads, median, type Load, type RoundResult } from './measure.js';
import type { Counters } from './procs/protocol.js';
import { cpuRow, limitRow, round, throughputRow, type BenchRow } from './report.js';

export interface SinkBenchOptions {
  readonly seconds: number;
  readonly rounds: number;
  readonly connections: number;
  readonly maxWarmupSlices: number;
  /** `--pin`: servers on CPU 0, load generators on CPU 1 (taskset). */
  readonly pin: boolean;
  readonly log: (line: string) => void;
}

const HELLO_JS = fileURLToPath(new URL('./hello-server.js', import.meta.url));

class HttpSide implements Load {
  readonly name: string;
  readonly #child: NodeChild;
  readonly #server: NodeDaemon;
  readonly #serverName: string;
  readonly #prepare: (round: number) => Promise<Record<string, unknown>>;
  readonly #started: (round: number, told: ChildMessage) => void;
  peakRss = 0;
  summaries: ChildMessage[] = [];

  constructor(
    name: string,
    serverName: string,
    server: NodeDaemon,
    prepare: (round: number) => Promise<Record<string, unknown>>,
    started: (round: number, told: ChildMessage) => void = () => undefined,
  ) {
    this.name = name;
    this.#serverName = serverName;
    this.#server = server;
    this.#prepare = prepare;
    this.#started = started;
    this.#child = new NodeChild('http-load.js', `load-${name}`);
  }

  get loadPid(): number {
    return this.#child.pid;
  }

  counted() {
    return { [this.#serverName]: this.#server.pid };
  }
  clients() {
    return [this.#child.pid];
  }
  async start(round: number): Promise<void> {
    const params = await this.#prepare(round);
    this.#started(round, await this.#child.request({ type: 'start', ...params }, 'started', 180_000));
  }
  async sample(mark?: 'begin' | 'end'): Promise<Counters> {
    const m = await this.#child.request({ type: 'sample', ...(mark === undefined ? {} : { mark }) }, 'sample');
    return { ops: Number(m.ops), errors: Number(m.errors) };
  }
  async stop(): Promise<Record<string, unknown>> {
    this.peakRss = Math.max(this.peakRss, rssBytes(this.#server.pid) ?? 0);
    const m = await this.#child.request({ type: 'stop' }, 'stopped');
    this.summaries.push(m);
    return m;
  }
  close(): Promise<void> {
    return this.#child.kill();
  }
}

/** The sink's capability cache in this suite: at least a round's grants of the batched side. */
const CACHE_ENTRIES = 400_000;

/** Writes per request of the batched side. */
const BATCH = 8;

/** The sum of counter `name` over the samples whose `outcome` label passes `keep`. */
function counterSum(text: string, name: string, keep: (outcome: string) => boolean): number {
  const sample = new RegExp(`^${name}\\{outcome="([^"]*)"\\} (\\S+)$`);
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = sample.exec(line);
    if (m?.[1] !== undefined && keep(m[1])) sum += Number(m[2]);
  }
  return sum;
}

function histogramMean(text: string, name: string): number {
  const s = new RegExp(`^${name}_sum (\\S+)$`, 'm').exec(text)?.[1];
  const c = new RegExp(`^${name}_count (\\S+)$`, 'm').exec(text)?.[1];
  return s !== undefined && c !== undefined && Number(c) > 0 ? Number(s) / Number(c) : 0;
}

/**
 * `LEASEHOLD_BENCH_SINK_SIDES=write-200,hello` runs only those sides (write-200, write-4k,
 * write-200-batch8, hello, post-echo; a faster A-B loop while developing); unset, every side runs. A row
 * whose sides did not run is left out.
 */
function sideWanted(name: string): boolean {
  const sides = process.env.LEASEHOLD_BENCH_SINK_SIDES;
  return sides === undefined || sides.split(',').some((s) => s.trim() === name);
}

export async function runSinkBench(o: SinkBenchOptions): Promise<BenchRow[]> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-sink-bench-'));
  const keys: Pick<StackKeys, 'sinkKey' | 'capability'> = {
    sinkKey: 'bench-coordinator-key-000000001',
    capability: `bench:${generateCapabilitySeed(randomBytes)}`,
  };
  const sink = await startSinkProcess(dir, keys, 'sink-suite', {
    LEASEHOLD_SINK_CAPABILITY_CACHE_ENTRIES: String(CACHE_ENTRIES),
  });
  const hello = await startNodeDaemon({ name: 'hello', script: HELLO_JS, dir, env: {} });
  const sides: HttpSide[] = [];
  try {
    // Grants prepared per round: enough for the warm-up and the window at the fastest rate seen so
    // far, and 40 % more (rates swing by a third from round to round) — each side's own rate once it
    // has run a round; before that, the lone 200 B writes' rate. Those that run out reuse grants,
    // counted in the row's note.
    let expected = 20_000;
    const seen = new Map<string, number>();
    const writeSide = (bytes: number, batch = 1) => {
      const name = `${bytes < 1024 ? 'write-200' : 'write-4k'}${batch > 1 ? `-batch${batch}` : ''}`;
      let count = 0;
      return new HttpSide(
        name,
        'sink',
        sink,
        (r) => {
          const slices = r === 1 ? o.maxWarmupSlices : 1;
          // Batched writes go faster than lone ones: grants for up to 4 times the lone rate at first.
          const rate = seen.get(name) ?? expected * (batch > 1 ? 4 : 1);
          count = Math.ceil(rate * (slices + o.seconds + 1) * 1.4);
          const prefix = `${name}/${r}/`;
          const token = String(1000 + r);
          // The load generator signs and advances them (vouched), as the coordinator would.
          const write = {
            prefix,
            count,
            token,
            key: keys.capability,
            sinkKey: keys.sinkKey,
            payloadBytes: bytes,
            batch,
          };
          return Promise.resolve({ port: sink.port, connections: o.connections, mode: 'write', write });
        },
        (r, told) => {
          o.log(`${name} round ${r}: ${count} grants signed and advanced in ${Number(told.preparedMs)} ms`);
        },
      );
    };
    // (A side spawns its load generator when made, so only the wanted ones are made.)
    if (sideWanted('write-200')) sides.push(writeSide(200));
    if (sideWanted('write-4k')) sides.push(writeSide(4096));
    if (sideWanted(`write-200-batch${BATCH}`)) sides.push(writeSide(200, BATCH));
    if (sideWanted('hello')) {
      sides.push(
        new HttpSide('hello', 'hello', hello, () =>
          Promise.resolve({ port: hello.port, connections: o.connections, mode: 'hello' }),
        ),
      );
    }
    if (sideWanted('post-echo')) {
      const echo = {
        prefix: 'echo/',
        count: 1,
        token: '1000',
        key: keys.capability,
        sinkKey: keys.sinkKey,
        payloadBytes: 200,
      };
      sides.push(
        new HttpSide('post-echo', 'hello', hello, () =>
          Promise.resolve({ port: hello.port, connections: o.connections, mode: 'echo', write: echo }),
        ),
      );
    }
    let pinned = 'not pinned';
    if (o.pin) {
      const ok = [sink.pid, hello.pid].every((p) => pinToCpus(p, '0')) && sides.every((s) => pinToCpus(s.loadPid, '1'));
      pinned = ok ? 'servers pinned to CPU 0, load generators to CPU 1 (taskset)' : 'pinning asked but taskset failed';
      o.log(`sink: ${pinned}`);
    }
    const results = await interleaveLoads(o.rounds, sides, {
      seconds: o.seconds,
      maxWarmupSlices: o.maxWarmupSlices,
      log: (line) => {
        o.log(line);
        const [, side, rate] = /round \d+ (\S+): (\d+)\/s/.exec(line) ?? [];
        if (side === undefined || rate === undefined) return;
        seen.set(side, Math.max(2_000, Number(rate), seen.get(side) ?? 0));
        if (side === 'write-200') expected = Math.max(2_000, Number(rate));
      },
    });
    const metrics = await (await fetch(`${sink.url}/metrics`)).text();
    const get = (name: string): RoundResult[] => results.get(name) ?? [];
    const [w200, w4k, wBatch, helloR, echoR] = [
      get('write-200'),
      get('write-4k'),
      get(`write-200-batch${BATCH}`),
      get('hello'),
      get('post-echo'),
    ];
    const reused = sides.reduce((a, s) => a + s.summaries.reduce((b, m) => b + Number(m.reused ?? 0), 0), 0);
    // Refused requests, plus the items the sink refused inside batches answered 200 (its counters).
    const refusedItems = counterSum(
      metrics,
      'leasehold_sink_writes_total',
      (outcome) => !/^(written|replayed)$/.test(outcome),
    );
    const refusedRequests = [...w200, ...w4k, ...wBatch].reduce((a, r) => a + r.errors, 0);
    const checks = ['vouched', 'cached', 'verified', 'refused']
      .map((result) => {
        const n = new RegExp(`^leasehold_sink_capability_checks_total\\{result="${result}"\\} (\\S+)$`, 'm').exec(
          metrics,
        )?.[1];
        return `${result} ${n ?? 0}`;
      })
      .join(', ');
    const failed = refusedRequests + refusedItems;
    const p = (side: HttpSide | undefined, key: string) =>
      median((side?.summaries ?? []).map((m) => Number(m[key] ?? 0)));
    const side = (name: string) => sides.find((s) => s.name === name);
    const [s200, s4k, sBatch, sHello] = ['write-200', 'write-4k', `write-200-batch${BATCH}`, 'hello'].map(side);
    const ctx =
      `autocannon in its own process, ${o.connections} connections, ${pinned}; a fresh grant per write (own resource, token and ` +
      `capability, vouched for by its advance as the coordinator's are; capability checks over the suite: ${checks}); synchronous=FULL; mean group commit ${round(histogramMean(metrics, 'leasehold_sink_batch_ops'), 1)} writes / ` +
      `${round(1000 * histogramMean(metrics, 'leasehold_sink_commit_seconds'), 2)} ms; CPU = sink process vs hello process (/proc); ` +
      `load generator CPU per op: write-200 ${Math.round(median(w200.map((r) => r.clientUs)))} µs, hello ${Math.round(median(helloR.map((r) => r.clientUs)))} µs` +
      (reused > 0 ? `; ${reused} writes reused a prepared grant` : '');
    const sinkCpu = (r: RoundResult) => r.cpuUs.sink ?? 0;
    const helloCpu = (r: RoundResult) => r.cpuUs.hello ?? 0;
    const mib = (b: number) => b / 1024 / 1024;
    // A row whose sides did not run (LEASEHOLD_BENCH_SINK_SIDES) is left out.
    const ran = (...figures: RoundResult[][]) => figures.every((f) => f.length > 0) && helloR.length > 0;
    const rows: (BenchRow | false)[] = [
      ran(w200) &&
        throughputRow({
          name: 'sink durable fenced writes/s, 200 B result, fresh grant per write',
          unit: 'writes/s',
          figure: w200,
          base: helloR,
          baselineName: `fastify hello-world GET/s, ${o.connections} conns`,
          cpu: 'counted',
          note: ctx,
        }),
      ran(w200) &&
        cpuRow({
          name: 'sink CPU per durable write (200 B) vs hello-world CPU per request',
          figure: w200,
          base: helloR,
          figureCpu: sinkCpu,
          baseCpu: helloCpu,
          baselineName: 'fastify hello-world, same load generator',
          target: 2.5,
        }),
      ran(w200, echoR) &&
        cpuRow({
          name: 'sink CPU per durable write (200 B) vs a fastify POST echo of a body of its shape',
          figure: w200,
          base: echoR,
          figureCpu: sinkCpu,
          baseCpu: helloCpu,
          baselineName: 'the hello process answering POST / (body parsed, 4 fields back)',
          note:
            `no target: the echo (the hello process, the same load generator) is what a request with this body costs fastify ` +
            `before any sink logic; the sink adds the rest: claims and capability checks, the hand-off to its SQLite thread and ` +
            `the store, tracing, metrics, logs; echo vs hello CPU per request ` +
            `${round(median(echoR.map(helloCpu)) / Math.max(1, median(helloR.map(helloCpu))), 2)}×`,
        }),
      ran(w4k) &&
        throughputRow({
          name: 'sink durable fenced writes/s, 4 KiB result, fresh grant per write',
          unit: 'writes/s',
          figure: w4k,
          base: helloR,
          baselineName: `fastify hello-world GET/s, ${o.connections} conns`,
          cpu: 'counted',
        }),
      ran(w4k) &&
        cpuRow({
          name: 'sink CPU per durable write (4 KiB) vs hello-world CPU per request',
          figure: w4k,
          base: helloR,
          figureCpu: sinkCpu,
          baseCpu: helloCpu,
          baselineName: 'fastify hello-world, same load generator',
        }),
      ran(wBatch) &&
        throughputRow({
          name: `sink durable fenced writes/s, 200 B results ${BATCH} to a request (POST /v1/writes/batch)`,
          unit: 'writes/s',
          figure: wBatch,
          base: helloR,
          baselineName: `fastify hello-world GET/s, ${o.connections} conns`,
          cpu: 'counted',
          note: `each item a fresh grant, as for lone writes; the SDK's sink client sends writes this way (group commit per process)`,
        }),
      ran(wBatch) &&
        cpuRow({
          name: `sink CPU per durable write (200 B, ${BATCH} to a request) vs hello-world CPU per request`,
          figure: wBatch,
          base: helloR,
          figureCpu: sinkCpu,
          baseCpu: helloCpu,
          baselineName: 'fastify hello-world, same load generator',
        }),
      ran(w200, w4k, wBatch) &&
        limitRow({
          name: 'sink write latency p99, 200 B (under load)',
          value: p(s200, 'p99Ms'),
          unit: 'ms',
          baseline: p(sHello, 'p99Ms'),
          baselineName: 'fastify hello-world p99',
          note: `p50 ${p(s200, 'p50Ms')} ms, p999 ${p(s200, 'p999Ms')} ms; 4 KiB p99 ${p(s4k, 'p99Ms')} ms; batches of ${BATCH} p99 ${p(sBatch, 'p99Ms')} ms per request (medians over rounds)`,
        }),
      limitRow({
        name: 'sink failed writes',
        value: failed,
        unit: 'writes',
        limit: 0,
        digits: 0,
        note: `${refusedRequests} requests not answered 2xx, ${refusedItems} writes the sink refused (a refused lone write counts in both; refused batch items only in the second)`,
      }),
      ran(w200, w4k, wBatch) &&
        limitRow({
          name: 'sink RSS under write load (peak at round ends)',
          value: mib(Math.max(s200?.peakRss ?? 0, s4k?.peakRss ?? 0, sBatch?.peakRss ?? 0)),
          unit: 'MiB',
          baseline: mib(sHello?.peakRss ?? 0),
          baselineName: 'fastify hello-world RSS under load',
        }),
    ];
    return rows.filter((r): r is BenchRow => r !== false);
  } finally {
    for (const s of sides) await s.close();
    await hello.stop();
    await sink.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
