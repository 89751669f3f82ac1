import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LeaseholdError } from '@leasehold/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JsonHttp, parseBaseUrl } from './http-json.js';
import { SinkClient } from './sink-client.js';

/** A loopback server that answers every request with the path it was asked for. */
let server: Server;
let origin: string;
const seen: { method: string; url: string }[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '' });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ path: req.url }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
});

async function pathAsked(base: string, path: string): Promise<unknown> {
  const http = new JsonHttp({ url: base, timeoutMs: 5_000, peer: 'sink' });
  try {
    const reply = await http.request({ method: 'GET', path });
    return (reply.body as { path: unknown }).path;
  } finally {
    await http.close();
  }
}

describe('JsonHttp base URL', () => {
  it('keeps the base path as a prefix of every request path, with or without a trailing slash', async () => {
    expect(await pathAsked(origin, '/v1/writes')).toBe('/v1/writes');
    expect(await pathAsked(`${origin}/`, '/v1/writes')).toBe('/v1/writes');
    expect(await pathAsked(`${origin}/sink`, '/v1/writes')).toBe('/sink/v1/writes');
    expect(await pathAsked(`${origin}/sink/`, '/v1/writes')).toBe('/sink/v1/writes');
    expect(await pathAsked(`${origin}/a/b%20c//`, '/v1/decisions?after=0&limit=10')).toBe(
      '/a/b%20c/v1/decisions?after=0&limit=10',
    );
  });

  it('sends an encoded path as it is, after the prefix', async () => {
    expect(await pathAsked(`${origin}/sink`, '/v1/resources/a%2F..%2Fb')).toBe('/sink/v1/resources/a%2F..%2Fb');
  });

  it('a sink client behind a path prefix sends its requests there', async () => {
    seen.length = 0;
    const client = new SinkClient({ url: `${origin}/gateway/sink/`, writeBatching: false });
    try {
      // The loopback server is no sink: the reply does not parse as a write's, but the request
      // shows where the client sent it.
      await client.health().catch(() => undefined);
    } finally {
      await client.close();
    }
    expect(seen.map((r) => r.url)).toEqual(['/gateway/sink/healthz', '/gateway/sink/readyz']);
  });

  it.each([
    ['no scheme (host:port)', 'sink:8080', /not http:\/\/ or https:\/\//],
    ['no URL at all', '', /is not a URL/],
    ['another scheme', 'ftp://127.0.0.1/x', /not http:\/\/ or https:\/\//],
    ['credentials', 'http://user:secret@127.0.0.1/', /credentials in the URL/],
    ['a user name alone', 'https://user@127.0.0.1/', /credentials in the URL/],
    ['a query', 'http://127.0.0.1/sink?tenant=a', /a query/],
    ['an empty query', 'http://127.0.0.1/sink?', /a query/],
    ['a fragment', 'http://127.0.0.1/sink#x', /a fragment/],
  ])('refuses a base URL with %s when the client is made, with INVALID_MESSAGE', (_what, url, message) => {
    let thrown: unknown;
    try {
      parseBaseUrl(url, 'sink');
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(LeaseholdError);
    expect((thrown as LeaseholdError).code).toBe('INVALID_MESSAGE');
    expect((thrown as LeaseholdError).message).toMatch(message);
    expect(() => new JsonHttp({ url, timeoutMs: 1_000, peer: 'sink' })).toThrow(LeaseholdError);
  });

  it.each([
    'http://user:secret@127.0.0.1/',
    'http://127.0.0.1/sink?key=secret',
    'http://127.0.0.1/sink#secret',
    'secret:8080',
    'user:secret@127.0.0.1:8080',
    'http://[secret',
  ])('never puts what else a refused URL carries in its message (%s)', (url) => {
    let message = '';
    try {
      parseBaseUrl(url, 'sink');
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^sink URL /);
    expect(message).not.toContain('secret');
  });
});
