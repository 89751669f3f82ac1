/**
 * Stream caps hold under concurrent opens, on real servers over real sockets (one TCP connection
 * per stream, every connection made first and every request then written at once): the
 * coordinator's `GET /v1/events` (256, each with its own etcd watch on a real etcd), the console's
 * `GET /ui/api/stream` (64) and the sink's `GET /v1/events` (its EVENTS_MAX_CLIENTS, 64 here).
 * Exactly the cap gets 200; every other open gets the documented refusal with its code; closing
 * the streams gives their slots back.
 *
 * Mechanism: the slot is taken when a request is accepted, before any await (core/slots.ts), and
 * given back when the stream ends. Check before the watch starts but count after it (the old
 * order) and the coordinator answers 200 to all 300; drop the release and no stream is accepted
 * after the first 64 console streams close. (The console and the sink had no such race: their
 * check and count were already in one synchronous step; they now count at accept like the rest.)
 */
import { connect, type Socket } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { useStack } from '../harness/fixtures.js';

const PREFIX = 'test/stream-caps/';
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let coordinatorPort: number;

beforeAll(async () => {
  const c = await stack.coordinator();
  coordinatorPort = c.address.port;
});

interface Opened {
  readonly status: number;
  /** The error body of a refusal (empty for a stream). */
  readonly body: string;
  readonly retryAfter: string | undefined;
  close(): void;
}

/** A connected TCP socket, not yet sent anything. */
function connectTo(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** Send one GET on `socket`; resolves with the status (and a refusal's body) once they are in. */
function get(socket: Socket, path: string, bearer: string): Promise<Opened> {
  return new Promise((resolve, reject) => {
    let text = '';
    const close = (): void => {
      socket.destroy();
    };
    socket.setEncoding('utf8');
    socket.on('error', reject);
    socket.on('data', (chunk: string) => {
      text += chunk;
      const end = text.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine = '', ...lines] = text.slice(0, end).split('\r\n');
      const status = Number(statusLine.split(' ')[1]);
      const headers = new Map(
        lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const retryAfter = headers.get('retry-after');
      if (status === 200) {
        socket.removeAllListeners('data');
        resolve({ status, body: '', retryAfter, close });
        return;
      }
      const body = text.slice(end + 4);
      if (Buffer.byteLength(body) < Number(headers.get('content-length') ?? 0)) return;
      resolve({ status, body, retryAfter, close });
    });
    socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${bearer}\r\n\r\n`);
  });
}

/**
 * `count` opens at once: every connection is made first, then every request is written in one
 * synchronous loop, so the server reads them all before any of them can finish setting up.
 */
async function openAtOnce(count: number, port: number, path: string, bearer: string): Promise<Opened[]> {
  const sockets = await Promise.all(Array.from({ length: count }, () => connectTo(port)));
  return Promise.all(sockets.map((socket) => get(socket, path, bearer)));
}

async function open(port: number, path: string, bearer: string): Promise<Opened> {
  return get(await connectTo(port), path, bearer);
}

function tally(opened: readonly Opened[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const o of opened) {
    const key = o.status === 200 ? '200' : `${o.status} ${(JSON.parse(o.body) as { code: string }).code}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/** Wait (observable state, bounded) until one more stream is accepted, then close it. */
async function untilAccepted(port: number, path: string, bearer: string): Promise<void> {
  await expect
    .poll(
      async () => {
        const one = await open(port, path, bearer);
        one.close();
        return one.status;
      },
      { timeout: 10_000, interval: 50 },
    )
    .toBe(200);
}

describe('stream caps, 300 / 100 concurrent opens', () => {
  it('coordinator /v1/events: exactly 256 streams, 44 refused with 429 LIMIT_REACHED and Retry-After', async () => {
    const opened = await openAtOnce(300, coordinatorPort, '/v1/events', stack.keys.adminKey);
    try {
      expect(tally(opened)).toEqual({ '200': 256, '429 LIMIT_REACHED': 44 });
      expect(opened.find((o) => o.status === 429)?.retryAfter).toBe('5');
    } finally {
      for (const o of opened) o.close();
    }
    await untilAccepted(coordinatorPort, '/v1/events', stack.keys.adminKey);
  });

  it('console /ui/api/stream: exactly 64 streams, the rest 429 LIMIT_REACHED; slots come back', async () => {
    const opened = await openAtOnce(100, coordinatorPort, '/ui/api/stream', stack.keys.adminKey);
    try {
      expect(tally(opened)).toEqual({ '200': 64, '429 LIMIT_REACHED': 36 });
    } finally {
      for (const o of opened) o.close();
    }
    await untilAccepted(coordinatorPort, '/ui/api/stream', stack.keys.adminKey);
  });

  it('sink /v1/events: exactly EVENTS_MAX_CLIENTS (64) streams, the rest 429 LIMIT_REACHED', async () => {
    const port = stack.sink.address?.port ?? 0;
    // The coordinator's console relays the sink's events over one stream of its own.
    const already = stack.sink.events.size;
    const opened = await openAtOnce(100, port, '/v1/events', stack.keys.sinkKey);
    try {
      expect(tally(opened)).toEqual({ '200': 64 - already, '429 LIMIT_REACHED': 36 + already });
    } finally {
      for (const o of opened) o.close();
    }
    await untilAccepted(port, '/v1/events', stack.keys.sinkKey);
  });
});
