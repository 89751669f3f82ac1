/**
 * The reconnecting SSE reader against small real HTTP servers of the test's own (the transport is
 * what is tested here; the coordinator and sink streams have their own tests): resume with
 * Last-Event-ID after a dropped connection, failover between URLs, fatal refusals, retried 503s,
 * idle connections, malformed and unknown events, abort, and a coordinator `reset` moving the cursor.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LeaseholdError, type CoordinatorEvent } from '@leasehold/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { SseEventTooLargeError } from './errors.js';
import { decodeCoordinatorEvent } from './event-decoders.js';
import { streamEvents, type EventStreamOptions } from './event-stream.js';
import type { SseEvent } from './sse-parser.js';

type Handler = (req: IncomingMessage, res: ServerResponse, hit: number) => void;

interface TestServer {
  readonly url: string;
  /** Last-Event-ID of each request, in order (undefined: none). */
  readonly resumes: (string | undefined)[];
  close(): Promise<void>;
}

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.splice(0).map(
      (s) =>
        new Promise<void>((resolve) => {
          s.closeAllConnections();
          s.close(() => {
            resolve();
          });
        }),
    ),
  );
});

async function serve(handler: Handler): Promise<TestServer> {
  const resumes: (string | undefined)[] = [];
  const server = createServer((req, res) => {
    const header = req.headers['last-event-id'];
    resumes.push(typeof header === 'string' ? header : undefined);
    handler(req, res, resumes.length);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    resumes,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** A URL nothing listens on. */
async function deadUrl(): Promise<string> {
  const s = await serve(() => undefined);
  await s.close();
  return s.url;
}

const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' });
const frame = (id: number | undefined, event: string, data: unknown) =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

const plain = (event: SseEvent) => (event.event === 'n' ? { value: JSON.parse(event.data) as number } : undefined);

function options(urls: string[], extra: Partial<EventStreamOptions<number>> = {}): EventStreamOptions<number> {
  return {
    urls,
    path: '/v1/events',
    bearer: 'k',
    peer: 'test',
    decode: plain,
    reconnect: { initialMs: 5, maxMs: 20 },
    ...extra,
  };
}

async function take<T>(iterable: AsyncIterable<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  if (n === 0) return out;
  for await (const value of iterable) {
    out.push(value);
    if (out.length >= n) break;
  }
  return out;
}

describe('streamEvents', () => {
  it('reconnects after the server drops the connection and resumes after the last id seen', async () => {
    const server = await serve((req, res, hit) => {
      sse(res);
      if (hit === 1) {
        res.write(frame(1, 'n', 1) + frame(2, 'n', 2));
        setImmediate(() => res.destroy());
      } else {
        const after = Number(req.headers['last-event-id']);
        res.write(frame(after + 1, 'n', after + 1));
      }
    });
    expect(await take(streamEvents(options([server.url])), 3)).toEqual([1, 2, 3]);
    expect(server.resumes).toEqual([undefined, '2']);
  });

  it('sends the initial resume point as Last-Event-ID, not in the URL; events without an id leave the cursor', async () => {
    const paths: string[] = [];
    const server = await serve((req, res, hit) => {
      paths.push(req.url ?? '');
      sse(res);
      res.write(hit === 1 ? frame(8, 'n', 8) + frame(undefined, 'n', 0) : frame(9, 'n', 9));
      if (hit === 1) setImmediate(() => res.end());
    });
    expect(await take(streamEvents(options([server.url], { after: '7' })), 3)).toEqual([8, 0, 9]);
    expect(server.resumes).toEqual(['7', '8']);
    expect(paths).toEqual(['/v1/events', '/v1/events']);
  });

  it('fails over to the next URL, and back, resuming each time', async () => {
    const dead = await deadUrl();
    let a: TestServer | undefined;
    const connected: string[] = [];
    a = await serve((req, res) => {
      sse(res);
      const after = Number(req.headers['last-event-id'] ?? '0');
      res.write(frame(after + 1, 'n', after + 1));
      setImmediate(() => res.destroy()); // one event per connection
    });
    const events = await take(streamEvents(options([dead, a.url], { onConnected: (url) => connected.push(url) })), 3);
    expect(events).toEqual([1, 2, 3]);
    expect(connected).toEqual([a.url, a.url, a.url]);
    expect(a.resumes).toEqual([undefined, '1', '2']);
    a = undefined;
  });

  it('ends with the server code on a refusal a reconnect cannot fix (401), without retrying', async () => {
    const server = await serve((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', code: 'UNAUTHENTICATED', message: 'no', retryable: false }));
    });
    const err = await take(streamEvents(options([server.url])), 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseholdError);
    expect(err).toMatchObject({ code: 'UNAUTHENTICATED', retryable: false });
    expect(server.resumes).toHaveLength(1);
  });

  it('retries 503 (too many streams, shutting down) and transport failures', async () => {
    const disconnects: unknown[] = [];
    const server = await serve((_req, res, hit) => {
      if (hit < 3) {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', code: 'UNAVAILABLE', message: 'busy', retryable: true }));
        return;
      }
      sse(res);
      res.write(frame(1, 'n', 42));
    });
    const events = await take(
      streamEvents(options([server.url], { onDisconnected: (info) => disconnects.push(info.error) })),
      1,
    );
    expect(events).toEqual([42]);
    expect(disconnects).toHaveLength(2);
    expect(disconnects[0]).toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('reconnects when nothing arrives for idleTimeoutMs (a dead connection), and keepalives count as traffic', async () => {
    const server = await serve((_req, res, hit) => {
      sse(res);
      if (hit === 1)
        res.write(': open\n\n'); // then silence
      else res.write(frame(1, 'n', 1));
    });
    expect(await take(streamEvents(options([server.url], { idleTimeoutMs: 300 })), 1)).toEqual([1]);
    expect(server.resumes).toHaveLength(2);

    let timer: NodeJS.Timeout | undefined;
    const alive = await serve((_req, res, hit) => {
      sse(res);
      if (hit > 1) return;
      let beats = 0;
      timer = setInterval(() => {
        res.write(++beats < 8 ? ': keepalive\n\n' : frame(1, 'n', 7));
      }, 100);
    });
    expect(await take(streamEvents(options([alive.url], { idleTimeoutMs: 300 })), 1)).toEqual([7]);
    clearInterval(timer);
    expect(alive.resumes).toHaveLength(1);
  });

  it('ends with SseEventTooLargeError on an event over maxEventBytes, after the events before it, without retrying', async () => {
    const server = await serve((_req, res) => {
      sse(res);
      res.write(frame(1, 'n', 1));
      // An event that never ends, sent in pieces: the reader stops at the bound, not at the end.
      const piece = `data: ${'9'.repeat(1_000)}\n`;
      res.write(`id: 2\nevent: n\n${piece}`);
      const more = setInterval(() => res.write(piece), 5);
      res.on('close', () => {
        clearInterval(more);
      });
    });
    const seen: number[] = [];
    const err = await (async () => {
      for await (const n of streamEvents(options([server.url], { maxEventBytes: 16 * 1024 }))) seen.push(n);
    })().catch((e: unknown) => e);
    expect(seen).toEqual([1]);
    expect(err).toBeInstanceOf(SseEventTooLargeError);
    expect(err).toMatchObject({ code: 'PAYLOAD_TOO_LARGE', retryable: false, maxEventBytes: 16 * 1024 });
    expect(server.resumes).toHaveLength(1);
  });

  it('skips unknown event names and ends on a malformed known one', async () => {
    const server = await serve((_req, res) => {
      sse(res);
      res.write(frame(1, 'future-kind', { x: 1 }) + frame(2, 'task', { type: 'task', revision: 'nope' }));
    });
    const err = await take(
      streamEvents<CoordinatorEvent>({ ...options([server.url]), decode: decodeCoordinatorEvent }),
      1,
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'INVALID_MESSAGE', retryable: false });
    expect(server.resumes).toHaveLength(1);
  });

  it('moves the cursor to just before the revision a coordinator reset continues from', async () => {
    const server = await serve((_req, res, hit) => {
      sse(res);
      if (hit === 1) {
        res.write(frame(undefined, 'reset', { type: 'reset', revision: '10', reason: 'compacted' }));
        setImmediate(() => res.destroy());
      } else {
        res.write(
          frame(12, 'task', {
            type: 'task',
            revision: '12',
            event: 'submitted',
            taskId: 't',
            resource: 'r',
            state: 'pending',
            attempts: 0,
            maxAttempts: 3,
            atMs: 1,
          }),
        );
      }
    });
    const events = await take(
      streamEvents<CoordinatorEvent>({ ...options([server.url], { after: '3' }), decode: decodeCoordinatorEvent }),
      2,
    );
    expect(events.map((e) => e.type)).toEqual(['reset', 'task']);
    expect(server.resumes).toEqual(['3', '9']);
  });

  it('ends (done) promptly when the signal aborts, while connected or while waiting to reconnect', async () => {
    const server = await serve((_req, res) => {
      sse(res);
      res.write(frame(1, 'n', 1));
    });
    const controller = new AbortController();
    const seen: number[] = [];
    const run = (async () => {
      for await (const n of streamEvents(options([server.url], { signal: controller.signal }))) {
        seen.push(n);
        controller.abort();
      }
    })();
    await run;
    expect(seen).toEqual([1]);

    const dead = await deadUrl();
    const waiting = new AbortController();
    const disconnected = new Promise<void>((resolve) => {
      void (async () => {
        const iterable = streamEvents(
          options([dead], {
            signal: waiting.signal,
            reconnect: { initialMs: 60_000, maxMs: 60_000 },
            random: () => 0.99,
            onDisconnected: () => {
              resolve();
            },
          }),
        );
        for await (const n of iterable) seen.push(n);
      })();
    });
    await disconnected;
    const started = performance.now();
    waiting.abort();
    await expect.poll(() => performance.now() - started < 1_000).toBe(true);
  });
});
