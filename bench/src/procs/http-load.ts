/**
 * Child process: the HTTP load generator of the sink suite (autocannon, closed loop, keep-alive
 * connections), in its own process so the servers' baselines are not capped by the bench.
 *
 * `hello`: GET / (the fastify hello-world). `write`: POST /v1/writes, each request a fresh grant —
 * its own resource (advanced by the bench to `token` before the round), its own capability (so the
 * sink's capability cache never hits), its own result id, a result payload of `payloadBytes`; with
 * `batch` > 1, POST /v1/writes/batch with that many such writes per request (`ops` counts writes).
 * When the prepared grants run out it starts over with new result ids (`reused` counts those).
 */
import autocannon, { type Instance } from 'autocannon';
import { parseCapabilitySigningKey, signCapability } from '@leasehold/protocol';
import { serve, type Counters } from './protocol.js';

interface Params {
  readonly port: number;
  readonly connections: number;
  readonly mode: 'hello' | 'write';
  readonly write?: {
    readonly prefix: string;
    readonly count: number;
    readonly token: string;
    /** The capability signing key, `id:<seed>`. */
    readonly key: string;
    readonly payloadBytes: number;
    /** Writes per request: 1 → POST /v1/writes, more → POST /v1/writes/batch. Default 1. */
    readonly batch?: number;
  };
}

const counters: Counters = { ops: 0, errors: 0 };
let instance: Instance | undefined;
let recording = false;
let latencies: number[] = [];
let reused = 0;
/** Writes per 2xx response (a batch request carries several). */
let perResponse = 1;
const statuses = new Map<number, number>();

function writeBodies(w: NonNullable<Params['write']>): string[] {
  // ~payloadBytes of result JSON: a status and an opaque output string.
  const filler = 'x'.repeat(Math.max(0, w.payloadBytes - 40));
  const key = parseCapabilitySigningKey(w.key);
  return Array.from({ length: w.count }, (_, i) => {
    const resource = `${w.prefix}${i}`;
    const workerId = `lg-${i}`;
    const incarnation = `inc-${i}`;
    const capability = signCapability(key, { resource, token: BigInt(w.token), workerId, incarnation });
    return JSON.stringify({
      resource,
      token: w.token,
      resultId: `res-${i}-@`,
      workerId,
      incarnation,
      capability,
      payload: { status: 'done', n: i, output: filler },
    });
  });
}

serve<Params>({
  start(p) {
    counters.ops = 0;
    counters.errors = 0;
    latencies = [];
    reused = 0;
    perResponse = 1;
    statuses.clear();
    const url = `http://127.0.0.1:${p.port}`;
    const common = { url, connections: p.connections, pipelining: 1, duration: 3_600, timeout: 10 };
    if (p.mode === 'hello' || p.write === undefined) {
      instance = autocannon({ ...common, method: 'GET' });
    } else {
      const bodies = writeBodies(p.write);
      const batch = Math.max(1, p.write.batch ?? 1);
      let next = 0;
      let pass = 0;
      const nextBody = (): string => {
        if (next >= bodies.length) {
          next = 0;
          pass += 1;
        }
        if (pass > 0) reused += 1;
        return (bodies[next++] ?? '').replace('-@', `-${pass}`);
      };
      instance = autocannon({
        ...common,
        requests: [
          {
            method: 'POST',
            path: batch === 1 ? '/v1/writes' : '/v1/writes/batch',
            headers: { 'content-type': 'application/json' },
            setupRequest: (req) => {
              const body =
                batch === 1 ? nextBody() : `{"items":[${Array.from({ length: batch }, nextBody).join(',')}]}`;
              return { ...req, body };
            },
          },
        ],
      });
      perResponse = batch;
    }
    instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) {
        counters.ops += perResponse;
        if (recording) latencies.push(ms);
      } else {
        counters.errors += 1;
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    });
    instance.on('reqError', () => {
      counters.errors += 1;
    });
    return Promise.resolve();
  },
  sample(mark) {
    if (mark === 'begin') recording = true;
    if (mark === 'end') recording = false;
    return counters;
  },
  async stop() {
    const done = new Promise((resolve) => instance?.once('done', resolve));
    instance?.stop();
    await done;
    latencies.sort((a, b) => a - b);
    const pct = (q: number) => latencies[Math.min(latencies.length - 1, Math.ceil(latencies.length * q) - 1)] ?? 0;
    return {
      p50Ms: pct(0.5),
      p99Ms: pct(0.99),
      p999Ms: pct(0.999),
      reused,
      statuses: Object.fromEntries(statuses),
    };
  },
});
