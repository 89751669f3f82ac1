/**
 * `GET /v1/events` on a real listening sink, read over HTTP with fetch (undici): decisions pushed
 * as they commit and resumed after a reconnect without loss or duplicates (SQLite in a thread,
 * SQLite in process, PostgreSQL, and two sinks sharing one PostgreSQL database); ephemeral
 * refusals; pruned resume points; a slow client cut off while a fast one keeps up; keepalives;
 * and a prompt shutdown with streams attached.
 */
import { connect, type Socket } from 'node:net';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startPostgres, type PostgresHandle } from '../../../test/harness/postgres.js';
import { createSink, type Sink, type SinkOptions } from './sink.js';
import {
  COORDINATOR_KEY,
  INCARNATION,
  READ_KEY,
  sign,
  tempDir,
  testOptions,
  type TempDir,
} from './testing/fixtures.js';
import { spawnSink } from './testing/spawn-sink.js';
import { openEvents, type TestEventStream, type TestSseEvent } from './testing/sse-reader.js';

const silent = pino({ level: 'silent' });

interface Running {
  readonly sink: Sink;
  readonly url: string;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function start(overrides: Partial<SinkOptions> = {}, dir?: TempDir): Promise<Running> {
  const d = dir ?? tempDir();
  if (dir === undefined) {
    cleanups.push(() => {
      d.remove();
    });
  }
  const sink = await createSink(testOptions(d.file('sink.db'), overrides), { logger: silent, processMetrics: false });
  cleanups.push(() => sink.close());
  return { sink, url: `http://127.0.0.1:${sink.address?.port ?? 0}` };
}

async function stream(url: string, options: Parameters<typeof openEvents>[1] = {}): Promise<TestEventStream> {
  const s = await openEvents(url, { key: READ_KEY, ...options });
  cleanups.push(() => {
    s.close();
  });
  return s;
}

/** `key` null: no Authorization header. */
async function post(url: string, path: string, body: unknown, key: string | null = COORDINATOR_KEY) {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const advance = (url: string, resource: string, token: number) =>
  post(url, '/v1/fences/advance', { resource, token: String(token) });

const write = (url: string, resource: string, token: number, workerId = 'w1', capability?: string) =>
  post(
    url,
    '/v1/writes',
    {
      resource,
      token: String(token),
      resultId: `task:${resource}`,
      workerId,
      incarnation: INCARNATION,
      capability: capability ?? sign(resource, BigInt(token), workerId),
      payload: { token },
    },
    null,
  );

const decisions = (events: readonly TestSseEvent[]) => events.filter((e) => e.event === 'decision');
const seqs = (events: readonly TestSseEvent[]) => decisions(events).map((e) => Number(e.id));
const count = (n: number) => (events: readonly TestSseEvent[]) => decisions(events).length >= n;

function describeResume(name: string, options: () => Partial<SinkOptions>) {
  it(`${name}: pushes each decision as it commits and resumes after a reconnect, every entry once`, async () => {
    const { url } = await start(options());
    const first = await stream(url, { after: 0 });
    expect(first.status).toBe(200);
    await advance(url, 'r1', 1);
    await write(url, 'r1', 1);
    await advance(url, 'r1', 2);
    await write(url, 'r1', 1); // stale
    await first.until(count(4));
    expect(decisions(first.events).map((e) => e.data)).toMatchObject([
      { type: 'decision', seq: 1, kind: 'advance', resource: 'r1', token: '1', outcome: 'advanced' },
      { type: 'decision', seq: 2, kind: 'write', token: '1', outcome: 'written', workerId: 'w1' },
      { type: 'decision', seq: 3, kind: 'advance', token: '2', fenceBefore: '1', outcome: 'advanced' },
      { type: 'decision', seq: 4, kind: 'write', token: '1', fenceBefore: '2', outcome: 'STALE_TOKEN' },
    ]);
    first.close();
    await first.ended;
    const lastSeen = decisions(first.events).at(-1)?.id ?? '';

    // Missed while disconnected: 5 and 6. Then live: 7.
    await advance(url, 'r2', 5);
    await write(url, 'r2', 5);
    const resumed = await stream(url, { after: 1, lastEventId: lastSeen }); // the header wins
    await resumed.until(count(2));
    await advance(url, 'r2', 6);
    await resumed.until(count(3));
    expect(seqs(resumed.events)).toEqual([5, 6, 7]);

    // From now (no resume point): only what commits after subscribing.
    const fresh = await stream(url);
    await fresh.until((_) => fresh.comments.length > 0);
    await advance(url, 'r3', 9);
    await fresh.until(count(1));
    await resumed.until(count(4));
    expect(seqs(fresh.events)).toEqual([8]);
    expect(seqs(resumed.events)).toEqual([5, 6, 7, 8]);
  });
}

describe('GET /v1/events: resume', () => {
  describeResume('SQLite (store thread)', () => ({ storeThread: true }));
  describeResume('SQLite (in process)', () => ({ storeThread: false }));
});

describe('GET /v1/events over PostgreSQL', () => {
  let server: PostgresHandle;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server.stop();
  });
  const pgOptions = (): Partial<SinkOptions> => ({ store: 'postgres', databaseUrl: server.url, databasePoolSize: 4 });

  it('PostgreSQL: pushes each decision as it commits and resumes after a reconnect, every entry once', async () => {
    await server.resetSchema();
    const { url } = await start(pgOptions());
    const s = await stream(url, { after: 0 });
    for (let t = 1; t <= 5; t++) await advance(url, 'p', t);
    await s.until(count(5));
    s.close();
    await advance(url, 'p', 6);
    const resumed = await stream(url, { lastEventId: '5' });
    await advance(url, 'p', 7);
    await resumed.until(count(2));
    expect(seqs(s.events)).toEqual([1, 2, 3, 4, 5]);
    expect(seqs(resumed.events)).toEqual([6, 7]);
  });

  it('two sinks on one database: a stream of one also shows what the other committed', async () => {
    await server.resetSchema();
    const a = await start(pgOptions());
    const b = await start(pgOptions());
    const s = await stream(a.url, { after: 0 });
    await advance(b.url, 'shared', 1);
    await advance(b.url, 'shared', 2);
    await s.until(count(2));
    expect(decisions(s.events).map((e) => (e.data as { token: string }).token)).toEqual(['1', '2']);
  });
});

describe('GET /v1/events: refusals', () => {
  it('publishes refusals of writes and advances decided before the store, without an id, and stores nothing', async () => {
    const { url } = await start({ bodyLimitBytes: 2048 });
    const s = await stream(url);
    await s.until(() => s.comments.length > 0);
    expect((await post(url, '/v1/fences/advance', { resource: 'r', token: '1' }, null)).status).toBe(401);
    expect((await post(url, '/v1/fences/advance', { resource: 'r', token: '1' }, READ_KEY)).status).toBe(403);
    const missing = await post(
      url,
      '/v1/writes',
      { resource: 'r', token: '3', resultId: 'x', workerId: 'mallory', incarnation: 'i', payload: 1 },
      null,
    );
    expect(missing.status).toBe(401);
    expect((await write(url, 'r', 3, 'mallory', sign('r', 3n, 'alice'))).status).toBe(403);
    expect((await post(url, '/v1/writes', '{"resource": "r", ', null)).status).toBe(400);
    expect((await post(url, '/v1/fences/advance-batch', { items: [] })).status).toBe(400);
    expect((await post(url, '/v1/fences/advance', { resource: 'r', token: 'x'.repeat(4000) })).status).toBe(413);
    // A hostile field value is not echoed: '../x' is not a valid resource id.
    expect((await write(url, '../x', 4, 'w1', 'v1.k2.junk')).status).toBe(400);
    // A batch: each refused item is one event with its own claims; the batch as a whole is one.
    const item = { resource: 'r', token: '5', resultId: 'y', workerId: 'eve', incarnation: INCARNATION, payload: 1 };
    const batch = await post(
      url,
      '/v1/writes/batch',
      { items: [item, { ...item, capability: sign('r', 5n, 'alice') }, { ...item, capability: 'x', traceparent: 1 }] },
      null,
    );
    expect(batch.status).toBe(200);
    expect((await post(url, '/v1/writes/batch', { items: [] }, null)).status).toBe(400);

    const refusals = await s.until((events) => events.filter((e) => e.event === 'refusal').length >= 12);
    expect(refusals.every((e) => e.event === 'refusal' && e.id === undefined)).toBe(true);
    expect(refusals.map((e) => e.data)).toMatchObject([
      { type: 'refusal', route: '/v1/fences/advance', code: 'UNAUTHENTICATED' },
      { route: '/v1/fences/advance', code: 'FORBIDDEN' },
      { route: '/v1/writes', code: 'UNAUTHENTICATED', resource: 'r', token: '3', workerId: 'mallory' },
      { route: '/v1/writes', code: 'FORBIDDEN', resource: 'r', token: '3', workerId: 'mallory' },
      { route: '/v1/writes', code: 'INVALID_MESSAGE' },
      { route: '/v1/fences/advance-batch', code: 'INVALID_MESSAGE' },
      { route: '/v1/fences/advance', code: 'PAYLOAD_TOO_LARGE' },
      { route: '/v1/writes', code: 'INVALID_MESSAGE', token: '4', workerId: 'w1' },
      { route: '/v1/writes/batch', code: 'UNAUTHENTICATED', resource: 'r', token: '5', workerId: 'eve' },
      { route: '/v1/writes/batch', code: 'FORBIDDEN', resource: 'r', token: '5', workerId: 'eve' },
      { route: '/v1/writes/batch', code: 'INVALID_MESSAGE', resource: 'r', token: '5', workerId: 'eve' },
      { route: '/v1/writes/batch', code: 'INVALID_MESSAGE' },
    ]);
    expect(refusals[11]?.data).not.toHaveProperty('resource');
    expect((refusals[0]?.data as { remote?: string }).remote).toBe('127.0.0.1');
    expect(refusals[7]?.data).not.toHaveProperty('resource');
    // Bearer keys are checked before the body is parsed: nothing claimed for those.
    expect(refusals[0]?.data).not.toHaveProperty('resource');
    expect(refusals[1]?.data).not.toHaveProperty('resource');

    // Nothing was stored, and a later reader replays no refusal: its first event is the next decision.
    const page = (await (
      await fetch(`${url}/v1/decisions`, { headers: { authorization: `Bearer ${READ_KEY}` } })
    ).json()) as { decisions: unknown[] };
    expect(page.decisions).toEqual([]);
    const later = await stream(url, { after: 0 });
    await advance(url, 'r', 1);
    await later.until(count(1));
    expect(later.events.map((e) => e.event)).toEqual(['decision']);
    // The store's own refusals are decisions (durable), not refusal events.
    await write(url, 'r', 2, 'w1');
    await s.until(count(2));
    expect(decisions(s.events).at(-1)?.data).toMatchObject({ outcome: 'FENCE_CONFLICT' });
  });
});

describe('GET /v1/events: limits and lifecycle', () => {
  it('says reset (pruned) when entries after the resume point were pruned, with the id to continue from', async () => {
    const { url } = await start({ decisionRetention: 5 });
    for (let t = 1; t <= 20; t++) await advance(url, 'r', t);
    const s = await stream(url, { after: 2 });
    await s.until((events) => events.length >= 2);
    const [reset, first] = s.events;
    const oldest = Number(first?.id);
    expect(oldest).toBeGreaterThan(3);
    expect(reset).toEqual({
      id: String(oldest - 1),
      event: 'reset',
      data: { type: 'reset', reason: 'pruned', requested: 2, resumeAfter: oldest - 1, oldestRetained: oldest },
    });
    await s.until(count(20 - oldest + 1));
    expect(seqs(s.events).at(-1)).toBe(20);
  });

  it('refuses a bad resume point (400), a missing key (401), and streams beyond the limit (429 LIMIT_REACHED)', async () => {
    // (fetch's pool opens a spare connection when a stream is aborted and never uses it; a short
    // shutdown timeout keeps that idle socket from holding the test's cleanup.)
    const { sink, url } = await start({ eventsMaxClients: 1, shutdownTimeoutMs: 200 });
    expect((await openEvents(url, { key: READ_KEY, lastEventId: 'abc' })).status).toBe(400);
    expect((await openEvents(url, { key: READ_KEY, after: '-1' })).status).toBe(400);
    expect((await openEvents(url, {})).status).toBe(401);
    const one = await stream(url);
    expect(one.status).toBe(200);
    expect((await openEvents(url, { key: COORDINATOR_KEY })).status).toBe(429);
    one.close();
    await expect.poll(() => sink.events.size).toBe(0);
    expect((await stream(url)).status).toBe(200);
  });

  it('sends keepalive comments', async () => {
    const { url } = await start({ eventsKeepaliveMs: 100 });
    const s = await stream(url);
    await expect.poll(() => s.comments.filter((c) => c === 'keepalive').length, { timeout: 5_000 }).toBeGreaterThan(1);
  });

  it('cuts off a client that does not read, while a client that reads gets everything', async () => {
    const { sink, url } = await start({ eventsMaxBufferedBytes: 512 * 1024 });
    const fast = await stream(url, { after: 0 });
    const slow = await pausedReader(sink.address?.port ?? 0);
    cleanups.push(() => {
      slow.destroy();
    });
    await expect.poll(() => sink.events.size).toBe(2);
    // Produce until the sink gives up on the slow reader (kernel buffers absorb the first MBs).
    let batches = 0;
    while ((await cutCount(sink)) === 0) {
      if (++batches > 400) throw new Error('the slow reader was never cut off');
      const items = Array.from({ length: 1000 }, (_, i) => ({ resource: `bulk-${i}`, token: String(batches) }));
      expect((await post(url, '/v1/fences/advance-batch', { items })).status).toBe(200);
    }
    expect(sink.events.size).toBe(1);
    await fast.until(count(batches * 1000), 30_000);
    expect(seqs(fast.events)).toEqual(Array.from({ length: batches * 1000 }, (_, i) => i + 1));
  });

  it('closes promptly with streams attached, and their clients see the end', async () => {
    const dir = tempDir();
    cleanups.push(() => {
      dir.remove();
    });
    const sink = await createSink(testOptions(dir.file('sink.db'), { shutdownTimeoutMs: 30_000 }), {
      logger: silent,
      processMetrics: false,
    });
    const url = `http://127.0.0.1:${sink.address?.port ?? 0}`;
    const streams = await Promise.all([stream(url), stream(url, { after: 0 }), stream(url)]);
    await expect.poll(() => sink.events.size).toBe(3);
    const started = performance.now();
    await sink.close();
    expect(performance.now() - started).toBeLessThan(5_000);
    await Promise.all(streams.map((s) => s.ended));
  });
});

describe('GET /v1/events on the built sink process', () => {
  it('streams, resumes after a restart on the same database, and a SIGTERM with streams open exits promptly', async () => {
    const dir = tempDir();
    cleanups.push(() => {
      dir.remove();
    });
    const dbPath = dir.file('sink.db');
    const first = await spawnSink({ dir: dir.path, dbPath, env: { LEASEHOLD_SINK_SHUTDOWN_TIMEOUT_MS: '30000' } });
    cleanups.push(() => {
      first.kill('SIGKILL');
    });
    const s = await stream(first.url, { after: 0 });
    await advance(first.url, 'p', 1);
    await advance(first.url, 'p', 2);
    await s.until(count(2));
    const started = performance.now();
    first.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    expect(performance.now() - started).toBeLessThan(5_000);
    await s.ended;

    const second = await spawnSink({ dir: dir.path, dbPath });
    cleanups.push(() => {
      second.kill('SIGKILL');
    });
    await advance(second.url, 'p', 3);
    const resumed = await stream(second.url, { lastEventId: decisions(s.events).at(-1)?.id ?? '' });
    await resumed.until(count(1));
    expect(seqs(resumed.events)).toEqual([3]);
    second.kill('SIGTERM');
    expect((await second.exited).code).toBe(0);
  });
});

async function cutCount(sink: Sink): Promise<number> {
  const metric = await sink.metrics.eventStreamsCut.get();
  return metric.values[0]?.value ?? 0;
}

/** A client that asks for the stream and then never reads from its socket. */
function pausedReader(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write(`GET /v1/events?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${READ_KEY}\r\n\r\n`);
      socket.once('data', () => {
        socket.pause();
        resolve(socket);
      });
    });
    socket.on('error', () => undefined);
    socket.once('error', reject);
  });
}
