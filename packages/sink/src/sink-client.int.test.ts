/**
 * The typed client against a real listening sink: the fence contract over HTTP, refusals as data,
 * other errors as coded LeaseholdErrors, transport failures and timeouts as retryable UNAVAILABLE.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from 'vitest';
import type { JsonValue } from '@leasehold/protocol';
import { LeaseholdError } from './errors.js';
import { createSink, type Sink } from './sink.js';
import { describeFenceContract } from './testing/contract.js';
import {
  COORDINATOR_KEY,
  INCARNATION,
  READ_KEY,
  sign,
  tempDir,
  testOptions,
  type TempDir,
} from './testing/fixtures.js';
import { clientTarget } from './testing/targets.js';
import { SinkClient } from '@leasehold/sink-client';

async function listeningSink(
  overrides: Parameters<typeof testOptions>[1] = {},
): Promise<{ sink: Sink; url: string; dir: TempDir }> {
  const dir = tempDir();
  const sink = await createSink(testOptions(dir.file('sink.db'), overrides), {
    logger: pino({ level: 'silent' }),
    processMetrics: false,
  });
  if (sink.address === null) throw new Error('not listening');
  return { sink, url: `http://127.0.0.1:${sink.address.port}`, dir };
}

/** A listening sink for each test of the describe it is called in (read `at.sink`, `at.url` inside the tests). */
function eachListeningSink(): { readonly sink: Sink; readonly url: string } {
  let live: { sink: Sink; url: string; dir: TempDir } | undefined;
  beforeEach(async () => {
    live = await listeningSink();
  });
  afterEach(async () => {
    await live?.sink.close();
    live?.dir.remove();
    live = undefined;
  });
  const current = () => {
    if (live === undefined) throw new Error('no sink outside a test');
    return live;
  };
  return {
    get sink() {
      return current().sink;
    },
    get url() {
      return current().url;
    },
  };
}

describeFenceContract('HTTP client against a listening sink', async (options) => {
  const { sink, url, dir } = await listeningSink(options);
  const client = new SinkClient({ url, key: COORDINATOR_KEY, maxSockets: 32 });
  return clientTarget(client, async () => {
    void client.close();
    await sink.close();
    dir.remove();
  });
});

describeFenceContract('HTTP client against a listening sink, one request per write', async (options) => {
  const { sink, url, dir } = await listeningSink(options);
  const client = new SinkClient({ url, key: COORDINATOR_KEY, maxSockets: 32, writeBatching: false });
  return clientTarget(
    client,
    async () => {
      void client.close();
      await sink.close();
      dir.remove();
    },
    { batchesWrites: false },
  );
});

describe('SinkClient errors', () => {
  const at = eachListeningSink();

  it('throws the sink code for non-refusal errors (401, 403, 400) and returns undefined for a missing result', async () => {
    const anonymous = new SinkClient({ url: at.url });
    await expect(anonymous.advance('r', 1n)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', retryable: false });
    const reader = new SinkClient({ url: at.url, key: READ_KEY });
    await expect(reader.advance('r', 1n)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    expect(await reader.getResult('r', 'none')).toBeUndefined();
    expect((await reader.getResource('r')).fence).toBe(0n);
    await expect(
      anonymous.write({
        resource: 'r',
        token: 1n,
        resultId: 'x',
        workerId: 'w',
        incarnation: INCARNATION,
        capability: 'v1.k2.x',
        payload: 1,
      }),
    ).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(reader.getResource('/bad')).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    void anonymous.close();
    void reader.close();
  });

  it('a closed port is UNAVAILABLE and retryable', async () => {
    const port = at.sink.address?.port ?? 0;
    await at.sink.close();
    const client = new SinkClient({ url: `http://127.0.0.1:${port}`, key: COORDINATOR_KEY });
    const err = await client.advance('r', 1n).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseholdError);
    expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    void client.close();
  });
});

describe('SinkClient pages', () => {
  const at = eachListeningSink();

  async function store(resource: string, token: bigint, count: number, payload: (i: number) => JsonValue = (i) => i) {
    expect((await at.sink.service.advance({ resource, token })).ok).toBe(true);
    await Promise.all(
      Array.from({ length: count }, (_, i) =>
        at.sink.service.write({
          resource,
          token,
          resultId: `r-${String(i).padStart(4, '0')}`,
          workerId: 'w',
          payload: payload(i),
        }),
      ),
    );
  }

  it('resourcePages iterates every page lazily, results landing during the walk included; getResource walks them all', async () => {
    await store('it/r', 2n, 25);
    const client = new SinkClient({ url: at.url, key: READ_KEY });
    const pages: number[] = [];
    const ids: string[] = [];
    for await (const page of client.resourcePages('it/r', { limit: 10 })) {
      pages.push(page.results.length);
      ids.push(...page.results.map((r) => r.resultId));
      expect(page.fence).toBe(2n);
      // A result stored while the walk is on its first page is in a later one.
      if (pages.length === 1)
        await at.sink.service.write({ resource: 'it/r', token: 2n, resultId: 'late', workerId: 'w', payload: 0 });
    }
    expect(pages).toEqual([10, 10, 6]);
    expect(ids.at(-1)).toBe('late');
    expect(new Set(ids).size).toBe(26);
    const whole = await client.getResource('it/r');
    expect(whole.results.map((r) => r.resultId)).toEqual(ids);
    expect(whole.fence).toBe(2n);
    // Resuming from a cursor.
    const second = await client.resourcePage('it/r', { limit: 10 });
    expect((await client.resourcePage('it/r', { after: second.next, limit: 1 })).results[0]?.resultId).toBe('r-0010');
    void client.close();
  });

  it('getFence reads the fence and no result', async () => {
    await store('f/r', 9n, 3, () => 'x'.repeat(30_000));
    const client = new SinkClient({ url: at.url, key: READ_KEY, maxResponseBytes: 2048 });
    expect(await client.getFence('f/r')).toBe(9n);
    expect(await client.getFence('f/never')).toBe(0n);
    // The same small reply limit refuses a page of results: getFence read none of them.
    await expect(client.resourcePage('f/r')).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false });
    void client.close();
  });

  it('a bad cursor or limit is INVALID_MESSAGE from the sink', async () => {
    const client = new SinkClient({ url: at.url, key: READ_KEY });
    await expect(client.resourcePage('r', { after: 'x' })).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    await expect(client.resourcePage('r', { limit: 1001 })).rejects.toMatchObject({ code: 'INVALID_MESSAGE' });
    void client.close();
  });
});

describe('SinkClient against other servers', () => {
  let server: Server;
  let url: string;
  let reply: (res: ServerResponse) => void;
  beforeEach(async () => {
    server = createServer((_req, res) => {
      reply(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const result = (i: number) => ({
    resource: 'r',
    resultId: `x${i}`,
    token: '1',
    workerId: 'w',
    payload: i,
    writtenAtMs: 1,
  });

  it('a sink from before paging (every result, no cursor) is one last page', async () => {
    reply = (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ resource: 'r', fence: '4', results: [result(1), result(2)] }));
    };
    const client = new SinkClient({ url, key: COORDINATOR_KEY });
    expect(await client.resourcePage('r')).toMatchObject({ fence: 4n, next: '0', hasMore: false });
    expect((await client.getResource('r')).results.map((r) => r.resultId)).toEqual(['x1', 'x2']);
    expect(await client.getFence('r')).toBe(4n);
    void client.close();
  });

  it('a reply over maxResponseBytes is PAYLOAD_TOO_LARGE, with or without a content-length', async () => {
    const body = JSON.stringify({ resource: 'r', fence: '4', results: [result(1)], next: '1', hasMore: false });
    let written = 0;
    for (const chunked of [false, true]) {
      reply = (res) => {
        res.writeHead(200, {
          'content-type': 'application/json',
          ...(chunked ? {} : { 'content-length': body.length * 1000 }),
        });
        // A long reply: the client must stop reading it.
        const pump = () => {
          while (written < 1000 && res.write(body)) written++;
          if (written < 1000 && !res.destroyed) res.once('drain', pump);
          else res.end();
        };
        written = 0;
        pump();
      };
      const client = new SinkClient({ url, key: COORDINATOR_KEY, maxResponseBytes: 4096 });
      await expect(client.resourcePage('r')).rejects.toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false });
      void client.close();
    }
    const client = new SinkClient({ url, key: COORDINATOR_KEY, maxResponseBytes: body.length * 1000 });
    reply = (res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    };
    expect((await client.resourcePage('r')).results).toHaveLength(1);
    void client.close();
  });
});

describe('SinkClient transport', () => {
  let server: Server;
  let url: string;
  beforeEach(async () => {
    server = createServer((req, res) => {
      if (req.url === '/v1/fences/advance') return; // never answers
      if (req.url?.startsWith('/v1/resources/half') === true) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"resource":'); // the head and part of the body, then nothing
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{not json');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a request with no reply times out as retryable UNAVAILABLE', async () => {
    const client = new SinkClient({ url, key: COORDINATOR_KEY, timeoutMs: 150 });
    const started = Date.now();
    await expect(client.advance('r', 1n)).rejects.toMatchObject({
      code: 'UNAVAILABLE',
      retryable: true,
      message: expect.stringContaining('no reply within 150 ms') as unknown,
    });
    expect(Date.now() - started).toBeLessThan(2000);
    void client.close();
  });

  it('the deadline covers the reply body: one that stops half-way times out as retryable UNAVAILABLE', async () => {
    const client = new SinkClient({ url, key: COORDINATOR_KEY, timeoutMs: 150 });
    const started = Date.now();
    await expect(client.getResource('half')).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(Date.now() - started).toBeLessThan(2000);
    void client.close();
  });

  it('an unparsable reply is retryable UNAVAILABLE', async () => {
    const client = new SinkClient({ url, key: COORDINATOR_KEY });
    await expect(client.getResource('r')).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    void client.close();
  });
});

describe('malformed HTTP', () => {
  it('gets our error body, not fastify default', async () => {
    const dir = tempDir();
    const sink = await createSink(testOptions(dir.file('sink.db')), {
      logger: pino({ level: 'silent' }),
      processMetrics: false,
    });
    try {
      const { connect } = await import('node:net');
      const socket = connect(sink.address?.port ?? 0, '127.0.0.1');
      let text = '';
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      socket.write('POST /v1/writes HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n');
      await new Promise((resolve) => socket.on('close', resolve));
      expect(text).toMatch(/^HTTP\/1.1 400/);
      expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).toMatchObject({
        type: 'error',
        code: 'INVALID_MESSAGE',
      });
    } finally {
      await sink.close();
      dir.remove();
    }
  });
});

describe('SinkClient write batching', () => {
  const writeArgs = (resultId: string, payload: JsonValue = resultId, workerId = 'w') => ({
    resource: 'r',
    token: 1n,
    resultId,
    workerId,
    incarnation: INCARNATION,
    capability: sign('r', 1n, workerId),
    payload,
  });
  const batchMetric = async (s: Sink, which: 'count' | 'sum') => {
    const text = (await s.app.inject({ url: '/metrics' })).body;
    const line = text.split('\n').find((l) => l.startsWith(`leasehold_sink_write_batch_items_${which} `));
    return Number(line?.split(' ')[1] ?? 0);
  };

  async function advancedSink(overrides: Parameters<typeof testOptions>[1] = {}) {
    const live = await listeningSink(overrides);
    const admin = new SinkClient({ url: live.url, key: COORDINATOR_KEY, writeBatching: false });
    expect(await admin.advance('r', 1n)).toMatchObject({ ok: true });
    void admin.close();
    onTestFinished(async () => {
      await live.sink.close();
      live.dir.remove();
    });
    return live;
  }

  it('writes fired together leave as one batch request; each gets its own answer, a refusal only its own', async () => {
    const live = await advancedSink();
    const client = new SinkClient({ url: live.url });
    const good = Array.from({ length: 20 }, (_, i) => client.write(writeArgs(`x${i}`)));
    const forbidden = client.write({ ...writeArgs('bad'), capability: sign('r', 1n, 'another-worker') });
    const ahead = client.write({ ...writeArgs('ahead'), token: 2n, capability: sign('r', 2n, 'w') });
    expect(await Promise.all(good)).toEqual(good.map(() => ({ ok: true, outcome: 'written', fence: 1n })));
    await expect(forbidden).rejects.toMatchObject({ code: 'FORBIDDEN', retryable: false });
    expect(await ahead).toEqual({ ok: false, code: 'FENCE_CONFLICT', fence: 1n });
    expect(await batchMetric(live.sink, 'count')).toBe(1);
    expect(await batchMetric(live.sink, 'sum')).toBe(22);
    void client.close();
  });

  it('keeps each request within maxItems and maxBytes; a write larger than maxBytes goes alone', async () => {
    const live = await advancedSink();
    const client = new SinkClient({ url: live.url, writeBatching: { maxItems: 4, maxBytes: 4096 } });
    const answers = await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => client.write(writeArgs(`x${i}`, 'y'.repeat(1000)))),
      client.write(writeArgs('large', 'z'.repeat(8000))),
    ]);
    expect(answers.every((a) => a.ok)).toBe(true);
    // 10 writes of ~1.2 KB: gathered 4, 4 and 2 at a time (maxItems), and each 4 sent as 3 + 1
    // (maxBytes): 5 requests; the large one on POST /v1/writes, outside every batch.
    expect(await batchMetric(live.sink, 'sum')).toBe(10);
    expect(await batchMetric(live.sink, 'count')).toBe(5);
    expect((await live.sink.service.resourcePage('r', { after: 0n, limit: 100 })).results).toHaveLength(11);
    void client.close();
  });

  it("a batch over the sink's body limit (413, nothing decided) goes again one request per write", async () => {
    const live = await advancedSink({ bodyLimitBytes: 1024 });
    const client = new SinkClient({ url: live.url });
    const answers = await Promise.all([
      client.write(writeArgs('a', 'y'.repeat(500))),
      client.write(writeArgs('b', 'y'.repeat(500))),
    ]);
    expect(answers).toEqual([
      { ok: true, outcome: 'written', fence: 1n },
      { ok: true, outcome: 'written', fence: 1n },
    ]);
    expect(await batchMetric(live.sink, 'count')).toBe(0);
    void client.close();
  });

  it('a write whose batch request failed in transit rejects UNAVAILABLE, retryable', async () => {
    const live = await listeningSink();
    const url = live.url;
    await live.sink.close();
    live.dir.remove();
    const client = new SinkClient({ url });
    const both = [client.write(writeArgs('a')), client.write(writeArgs('b'))];
    for (const w of both) await expect(w).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    void client.close();
  });

  it('a batch request that fails in transit fails its own writes only, not those of the other requests', async () => {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString()) as { items: { resultId: string }[] };
        if (body.items.some((i) => i.resultId === 'doomed')) {
          req.socket.destroy();
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        const ok = (i: { resultId: string }) => ({
          ok: true,
          resource: 'r',
          resultId: i.resultId,
          outcome: 'written',
          fence: '1',
        });
        res.end(JSON.stringify({ results: body.items.map(ok) }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new SinkClient({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      writeBatching: { maxBytes: 1500 },
    });
    // Each ~1.2 KB: one write per request, both requests from one gathered batch.
    const fine = client.write(writeArgs('fine', 'y'.repeat(1000)));
    const doomed = client.write(writeArgs('doomed', 'y'.repeat(1000)));
    await expect(doomed).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    expect(await fine).toEqual({ ok: true, outcome: 'written', fence: 1n });
    void client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('a sink without the batch route (404 NOT_FOUND) is written one request per write from then on', async () => {
    const paths: string[] = [];
    const server = createServer((req, res) => {
      paths.push(req.url ?? '');
      req.resume();
      req.on('end', () => {
        res.writeHead(req.url === '/v1/writes' ? 200 : 404, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify(
            req.url === '/v1/writes'
              ? { resource: 'r', resultId: 'x', outcome: 'written', fence: '1' }
              : {
                  type: 'error',
                  code: 'NOT_FOUND',
                  message: 'Route POST:/v1/writes/batch not found',
                  retryable: false,
                },
          ),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new SinkClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
    const first = await Promise.all([1, 2, 3].map((i) => client.write(writeArgs(`x${i}`))));
    const later = await Promise.all([4, 5].map((i) => client.write(writeArgs(`x${i}`))));
    expect([...first, ...later].every((a) => a.ok)).toBe(true);
    expect(paths).toEqual(['/v1/writes/batch', ...Array.from({ length: 5 }, () => '/v1/writes')]);
    void client.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
});
