/**
 * The typed client against a real listening sink: the fence contract over HTTP, refusals as data,
 * other errors as coded LeaseholdErrors, transport failures and timeouts as retryable UNAVAILABLE.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { LeaseholdError } from './errors.js';
import { createSink, type Sink } from './sink.js';
import { describeFenceContract } from './testing/contract.js';
import { COORDINATOR_KEY, INCARNATION, READ_KEY, tempDir, testOptions, type TempDir } from './testing/fixtures.js';
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

describeFenceContract('HTTP client against a listening sink', async (options) => {
  const { sink, url, dir } = await listeningSink(options);
  const client = new SinkClient({ url, key: COORDINATOR_KEY, maxSockets: 32 });
  return clientTarget(client, async () => {
    void client.close();
    await sink.close();
    dir.remove();
  });
});

describe('SinkClient errors', () => {
  let sink: Sink;
  let url: string;
  let dir: TempDir;
  beforeEach(async () => {
    ({ sink, url, dir } = await listeningSink());
  });
  afterEach(async () => {
    await sink.close();
    dir.remove();
  });

  it('throws the sink code for non-refusal errors (401, 403, 400) and returns undefined for a missing result', async () => {
    const anonymous = new SinkClient({ url });
    await expect(anonymous.advance('r', 1n)).rejects.toMatchObject({ code: 'UNAUTHENTICATED', retryable: false });
    const reader = new SinkClient({ url, key: READ_KEY });
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
    const port = sink.address?.port ?? 0;
    await sink.close();
    const client = new SinkClient({ url: `http://127.0.0.1:${port}`, key: COORDINATOR_KEY });
    const err = await client.advance('r', 1n).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaseholdError);
    expect(err).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
    void client.close();
  });
});

describe('SinkClient transport', () => {
  let server: Server;
  let url: string;
  beforeEach(async () => {
    server = createServer((req, res) => {
      if (req.url === '/v1/fences/advance') return; // never answers
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
    await expect(client.advance('r', 1n)).rejects.toMatchObject({ code: 'UNAVAILABLE', retryable: true });
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
