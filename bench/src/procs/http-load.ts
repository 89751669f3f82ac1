/**
 * Child process: the HTTP load generator of the sink suite (autocannon, closed loop, keep-alive
 * connections), in its own process so the servers' baselines are not capped by the bench.
 *
 * `hello`: GET / (the fastify hello-world). `echo`: POST / to the same hello-world process with one
 * body shaped as a lone write's (`write`'s fields, one grant signed here, nothing advanced), which
 * it parses and answers with four of its fields: what a request with a body costs fastify before any
 * sink logic. `write`: POST /v1/writes, each request a fresh grant —
 * its own resource, advanced to `token` before the load starts, its own capability, its own result
 * id, a result payload of `payloadBytes`; with `batch` > 1, POST /v1/writes/batch with that many
 * such writes per request (`ops` counts writes). When the prepared grants run out it starts over
 * with new result ids (`reused` counts those).
 *
 * The grants are prepared here, as the coordinator prepares its own: each capability is signed once,
 * and the fences are advanced in requests of 1000 that name each grant and carry a vouch over them
 * (`SinkClient.advanceBatch` with `vouchWith`), so the sink has each capability in its cache before
 * its first write. Signing dominates the preparation (~27 µs a grant), so it is done once, here,
 * not once by the bench for the vouch and once more here for the writes.
 */
import autocannon, { type Instance } from 'autocannon';
import { parseCapabilitySigningKey, signCapability, type CapabilitySigningKey } from '@leasehold/protocol';
import { SinkClient, type AdvanceArgs } from '@leasehold/sink-client';
import { serve, type Counters } from './protocol.js';

interface Params {
  readonly port: number;
  readonly connections: number;
  readonly mode: 'hello' | 'echo' | 'write';
  readonly write?: {
    readonly prefix: string;
    readonly count: number;
    readonly token: string;
    /** The capability signing key, `id:<seed>`. */
    readonly key: string;
    /** The sink's coordinator key (bearer of `POST /v1/fences/advance-batch`). */
    readonly sinkKey: string;
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

/** Grants per advance request (the sink's `MAX_BATCH`), and advance requests in flight. */
const ADVANCE_CHUNK = 1000;
const ADVANCE_IN_FLIGHT = 4;

/**
 * Sign `w.count` fresh grants and advance their fences (vouched), last grant first: should the
 * sink's capability cache be smaller than a round's grants, the ones written first are those it
 * keeps. Returns the write bodies, in the order they are sent.
 */
async function prepareWrites(port: number, w: NonNullable<Params['write']>): Promise<string[]> {
  const filler = fillerOf(w.payloadBytes);
  const signing = parseCapabilitySigningKey(w.key);
  const token = BigInt(w.token);
  const bodies = new Array<string>(w.count);
  const client = new SinkClient({ url: `http://127.0.0.1:${port}`, key: w.sinkKey, timeoutMs: 60_000 });
  const chunks = Math.ceil(w.count / ADVANCE_CHUNK);
  let nextChunk = 0;
  const advanceChunks = async (): Promise<void> => {
    while (nextChunk < chunks) {
      const c = nextChunk++;
      const items: AdvanceArgs[] = [];
      const top = w.count - 1 - c * ADVANCE_CHUNK;
      for (let i = top; i >= Math.max(0, top + 1 - ADVANCE_CHUNK); i--) {
        items.push(grantOf(signing, w, token, i, filler, bodies));
      }
      const results = await client.advanceBatch(items, { vouchWith: signing });
      const refused = results.find((r) => !r.ok);
      if (refused !== undefined) throw new Error(`advance of ${refused.resource} refused`);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.min(chunks, ADVANCE_IN_FLIGHT) }, advanceChunks));
  } finally {
    await client.close();
  }
  return bodies;
}

/** Grant `i`: its write body in `bodies[i]`, its advance item (naming the grant) returned. */
function grantOf(
  signing: CapabilitySigningKey,
  w: NonNullable<Params['write']>,
  token: bigint,
  i: number,
  filler: string,
  bodies: string[],
): AdvanceArgs {
  const { body, grant } = writeOf(signing, w, token, i, filler);
  bodies[i] = body;
  return { resource: `${w.prefix}${i}`, token, grant };
}

/** The write body of grant `i` (result id `res-<i>-@`) and the grant it names. */
function writeOf(
  signing: CapabilitySigningKey,
  w: NonNullable<Params['write']>,
  token: bigint,
  i: number,
  filler: string,
): { body: string; grant: NonNullable<AdvanceArgs['grant']> } {
  const resource = `${w.prefix}${i}`;
  const workerId = `lg-${i}`;
  const incarnation = `inc-${i}`;
  const capability = signCapability(signing, { resource, token, workerId, incarnation });
  const body = JSON.stringify({
    resource,
    token: w.token,
    resultId: `res-${i}-@`,
    workerId,
    incarnation,
    capability,
    payload: { status: 'done', n: i, output: filler },
  });
  return { body, grant: { workerId, incarnation, capability } };
}

/** ~payloadBytes of result JSON: a status and an opaque output string. */
const fillerOf = (payloadBytes: number): string => 'x'.repeat(Math.max(0, payloadBytes - 40));

serve<Params>({
  async start(p) {
    counters.ops = 0;
    counters.errors = 0;
    latencies = [];
    reused = 0;
    perResponse = 1;
    statuses.clear();
    const url = `http://127.0.0.1:${p.port}`;
    const common = { url, connections: p.connections, pipelining: 1, duration: 3_600, timeout: 10 };
    let preparedMs = 0;
    if (p.mode === 'hello' || p.write === undefined) {
      instance = autocannon({ ...common, method: 'GET' });
    } else if (p.mode === 'echo') {
      const w = p.write;
      const { body } = writeOf(parseCapabilitySigningKey(w.key), w, BigInt(w.token), 0, fillerOf(w.payloadBytes));
      instance = autocannon({ ...common, method: 'POST', headers: { 'content-type': 'application/json' }, body });
    } else {
      const t0 = performance.now();
      const bodies = await prepareWrites(p.port, p.write);
      preparedMs = Math.round(performance.now() - t0);
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
    return { preparedMs };
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
