/**
 * The fault proxy on real loopback sockets: each mode does what test/harness/fault-proxy.ts says.
 * The target is a small server that records what it receives and answers `ping:N` with `pong:N`.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { FaultProxy } from '../harness/fault-proxy.js';
import { seededRandom, startFaultProxy } from '../harness/fault-proxy.js';
import { waitFor } from '../harness/service.js';

interface Target {
  readonly server: Server;
  port: number;
  received: string;
  connections: number;
  readonly sockets: Socket[];
}

async function startTarget(): Promise<Target> {
  const target: Target = { server: createServer(), port: 0, received: '', connections: 0, sockets: [] };
  target.server.on('connection', (socket) => {
    target.connections += 1;
    target.sockets.push(socket);
    socket.on('error', () => undefined);
    socket.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      target.received += text;
      for (const m of text.matchAll(/ping:(\d+);/g)) socket.write(`pong:${m[1]};`);
    });
  });
  await new Promise<void>((r) => target.server.listen(0, '127.0.0.1', r));
  const address = target.server.address();
  target.port = typeof address === 'object' && address !== null ? address.port : 0;
  return target;
}

interface Client {
  readonly socket: Socket;
  received: string;
  error: (Error & { code?: string }) | undefined;
  closed: boolean;
}

async function open(proxy: FaultProxy, waitConnect = true): Promise<Client> {
  const socket = connect({ host: '127.0.0.1', port: proxy.port });
  const client: Client = { socket, received: '', error: undefined, closed: false };
  socket.on('data', (c: Buffer) => (client.received += c.toString()));
  socket.on('error', (e) => (client.error = e));
  socket.on('close', () => (client.closed = true));
  if (waitConnect) await new Promise<void>((r) => socket.once('connect', r));
  return client;
}

/** Wait (bounded) until what the sockets or the proxy's counters show makes `probe` true. */
async function until(what: string, probe: () => boolean, timeoutMs = 3_000): Promise<void> {
  await waitFor(what, probe, timeoutMs, 10);
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(): Promise<{ target: Target; proxy: FaultProxy }> {
  const target = await startTarget();
  const proxy = await startFaultProxy({ name: 'test', targetPort: target.port, random: seededRandom(7) });
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of target.sockets) s.destroy();
        target.server.close(() => {
          r();
        });
      }),
    () => proxy.close(),
  );
  return { target, proxy };
}

describe('fault proxy', () => {
  it('pass: forwards both ways', async () => {
    const { proxy } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('pong', () => c.received.includes('pong:1;'));
    expect(proxy.stats.bytesToTarget).toBe(7);
    expect(proxy.stats.bytesToClient).toBe(7);
  });

  it('blackhole: forwards nothing but keeps the socket, then delivers the held bytes in order on heal', async () => {
    const { target, proxy } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('first pong', () => c.received === 'pong:1;');
    proxy.setMode({ kind: 'blackhole' });
    c.socket.write('ping:2;');
    c.socket.write('ping:3;');
    // A new connection is accepted but not connected upstream.
    const late = await open(proxy);
    late.socket.write('ping:9;');
    // The proxy read ping 2 (and ping 3 if it came in the same chunk) and holds it: having held a
    // chunk it stops reading, so the rest waits in the kernel; the new connection is not read at all.
    await until('ping 2 held', () => proxy.stats.held >= 7 && proxy.stats.accepted === 2);
    expect(target.received).toBe('ping:1;');
    expect(target.connections).toBe(1);
    expect(c.received).toBe('pong:1;');
    expect(late.received).toBe('');
    expect(c.closed || late.closed).toBe(false);
    expect(proxy.connections).toBe(2);
    proxy.heal();
    await until('held pings answered', () => c.received === 'pong:1;pong:2;pong:3;' && late.received === 'pong:9;');
  });

  it('blackhole also holds the target-to-client direction', async () => {
    const { target, proxy } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('pong', () => c.received === 'pong:1;');
    proxy.setMode({ kind: 'blackhole' });
    for (const s of target.sockets) s.write('push;');
    await until('push held', () => proxy.stats.held === 5);
    expect(c.received).toBe('pong:1;');
    proxy.heal();
    await until('push delivered', () => c.received === 'pong:1;push;');
  });

  it('one-way to-target: the target hears nothing while its pushes still reach the client', async () => {
    const { target, proxy } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('pong', () => c.received === 'pong:1;');
    proxy.setMode({ kind: 'one-way', direction: 'to-target' });
    c.socket.write('ping:2;');
    for (const s of target.sockets) s.write('push;');
    await until('push', () => c.received === 'pong:1;push;');
    await until('ping 2 held', () => proxy.stats.held === 7);
    expect(target.received).toBe('ping:1;');
    proxy.heal();
    await until('held ping delivered', () => target.received === 'ping:1;ping:2;' && c.received.endsWith('pong:2;'));
  });

  it('one-way to-client: the target hears the client, the client hears nothing', async () => {
    const { proxy, target } = await setup();
    const c = await open(proxy);
    proxy.setMode({ kind: 'one-way', direction: 'to-client' });
    c.socket.write('ping:1;');
    await until('target got ping', () => target.received === 'ping:1;');
    await until('pong held', () => proxy.stats.held === 7);
    expect(c.received).toBe('');
    proxy.heal();
    await until('held pong', () => c.received === 'pong:1;');
  });

  it('one-way with discard drops that direction for good', async () => {
    const { proxy, target } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('pong', () => c.received === 'pong:1;');
    proxy.setMode({ kind: 'one-way', direction: 'to-client', discard: true });
    c.socket.write('ping:2;');
    await until('target got ping 2', () => target.received.includes('ping:2;'));
    await until('pong 2 dropped', () => proxy.stats.dropped === 7);
    proxy.heal();
    c.socket.write('ping:3;');
    await until('pong 3', () => c.received.includes('pong:3;'));
    expect(c.received).toBe('pong:1;pong:3;');
    expect(proxy.stats.dropped).toBe(7);
  });

  it('reset: open connections and new ones are destroyed with RST', async () => {
    const { proxy } = await setup();
    const c = await open(proxy);
    c.socket.write('ping:1;');
    await until('pong', () => c.received === 'pong:1;');
    proxy.setMode({ kind: 'reset' });
    await until('reset seen by the client', () => c.closed);
    expect(c.error?.code).toBe('ECONNRESET');
    const late = await open(proxy, false);
    await until('new connection reset', () => late.closed);
    expect(late.error?.code).toBe('ECONNRESET');
    expect(proxy.stats.reset).toBeGreaterThanOrEqual(2);
    proxy.heal();
    const again = await open(proxy);
    again.socket.write('ping:5;');
    await until('pong after heal', () => again.received === 'pong:5;');
  });

  it('latency with jitter: each direction is delayed, order is kept', async () => {
    const { proxy } = await setup();
    const c = await open(proxy);
    proxy.setMode({ kind: 'latency', delayMs: 100, jitterMs: 50 });
    const t0 = Date.now();
    c.socket.write('ping:0;');
    await until('pong', () => c.received === 'pong:0;');
    const rtt = Date.now() - t0;
    expect(rtt).toBeGreaterThanOrEqual(195);
    expect(rtt).toBeLessThan(1_000);
    c.received = '';
    for (let i = 1; i <= 40; i++) {
      c.socket.write(`ping:${i};`);
      // Cadence, not a wait: the writes are spread over a few ms so they arrive as separate chunks,
      // each with its own jitter, and the order must hold across them.
      await new Promise((r) => setTimeout(r, i % 3));
    }
    await until('40 pongs', () => (c.received.match(/pong/g) ?? []).length === 40);
    const order = [...c.received.matchAll(/pong:(\d+);/g)].map((m) => Number(m[1]));
    expect(order).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  it('a refused upstream (target down) reaches the client as a reset', async () => {
    const target = await startTarget();
    await new Promise<void>((r) =>
      target.server.close(() => {
        r();
      }),
    );
    const proxy = await startFaultProxy({ name: 'down', targetPort: target.port });
    cleanups.push(() => proxy.close());
    const c = await open(proxy, false);
    await until('closed', () => c.closed);
    expect(c.received).toBe('');
  });
});
