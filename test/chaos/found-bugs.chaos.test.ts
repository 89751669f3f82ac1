/**
 * Product bugs the chaos runs found, each reduced to a deterministic test that failed until the
 * fix landed (a bug still open runs as `it.fails`, so the suite stays green while it is there and
 * turns red the day it is fixed; `LEASEHOLD_KNOWN_BUGS=strict` runs those as plain `it`).
 *
 * 1. A worker whose session is welcomed more than a TTL after its hello (the coordinator was slow:
 *    etcd trouble, a pause) starts with its local deadline already past. A task granted before the
 *    first heartbeat ack is dropped locally ("local deadline passed before the write") and never
 *    released, while the session itself lives on: the coordinator keeps the lease, and the task
 *    stays `leased` for as long as the worker runs. Seen in `pnpm chaos --profile pg-short --seed 1`
 *    (22 tasks stuck behind four such leases), reproduced here with a fake coordinator.
 *    Fixed: the SDK releases a lease it gives up on its own deadline alone (the coordinator refuses
 *    the release when the lease is really gone, which changes nothing).
 */
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { PROTOCOL_VERSION } from '@leasehold/protocol';
import { startWorker } from '@leasehold/worker';
import { waitFor } from '../harness/service.js';

// No open bug today. The next one found goes here as
// `(process.env.LEASEHOLD_KNOWN_BUGS === 'strict' ? it : it.fails)(…)` until it is fixed.

interface Frame {
  readonly type: string;
  readonly id?: string;
  readonly requestId?: string;
  readonly resource?: string;
  readonly token?: string;
  readonly workerId?: string;
  readonly incarnation?: string;
}

/** A coordinator that welcomes late, grants one task at once, and records what the worker sends. */
async function fakeCoordinator(welcomeDelayMs: number, ttlMs: number) {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/v1/worker' });
  await once(server, 'listening');
  const received: Frame[] = [];
  let granted = false;
  let heartbeatAt = 0;
  server.on('connection', (ws: WebSocket) => {
    const send = (o: object) => {
      ws.send(JSON.stringify(o));
    };
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as Frame;
      received.push(m);
      if (m.type === 'hello')
        setTimeout(() => {
          send({
            type: 'welcome',
            inReplyTo: m.id,
            protocolVersion: PROTOCOL_VERSION,
            sessionId: 'abc123',
            workerId: m.workerId,
            incarnation: m.incarnation,
            coordinatorId: 'fake',
            resumed: false,
            ttlMs,
            heartbeatIntervalMs: Math.floor(ttlMs / 4),
          });
        }, welcomeDelayMs);
      if (m.type === 'heartbeat') heartbeatAt = Date.now();
      if (m.type === 'heartbeat') send({ type: 'heartbeat.ack', inReplyTo: m.id, sessionId: 'abc123', ttlMs });
      if (m.type === 'lease.acquire') {
        if (granted) send({ type: 'lease.none', inReplyTo: m.id, requestId: m.requestId, retryAfterMs: 1_000 });
        else {
          granted = true;
          send({
            type: 'lease.granted',
            inReplyTo: m.id,
            requestId: m.requestId,
            taskId: 't1',
            resource: 'r1',
            token: '5',
            capability: 'not-checked-here',
            ttlMs,
            payload: { n: 1 },
            attempt: 1,
          });
        }
      }
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    received,
    heartbeatAt: () => heartbeatAt,
    close: () => {
      server.close();
    },
  };
}

describe('found by chaos runs', () => {
  it(
    'a lease granted while the local deadline is stale (late welcome) is completed or released, not left held by a live session',
    { timeout: 30_000 },
    async () => {
      const ttlMs = 2_000;
      const coordinator = await fakeCoordinator(ttlMs + 500, ttlMs);
      const worker = startWorker({
        coordinators: [coordinator.url],
        sink: { url: 'http://127.0.0.1:9', timeoutMs: 500 }, // nothing listens: a write attempt fails fast
        credentials: { workerKey: 'k'.repeat(24) },
        workerId: 'w-late',
        concurrency: 1,
        handler: () => ({ v: 1 }),
      });
      const events: string[] = [];
      worker.on('*', (e) => events.push(e.type));
      try {
        // The grant reached the handler and the SDK gave up on it.
        await waitFor(
          'the grant to be handled',
          () => (events.includes('granted') && events.length > 1 ? true : undefined),
          15_000,
        );
        // Freed means: released or completed, or the session given up (heartbeats stop for a TTL, or
        // a new hello). Held means: heartbeats go on and nothing comes back for it, for 3 TTLs.
        const grantedAt = Date.now();
        const hellos = coordinator.received.filter((m) => m.type === 'hello').length;
        const freed = await waitFor(
          'the lease to be released, completed or given up with its session',
          () => {
            const r = coordinator.received;
            if (r.some((m) => (m.type === 'lease.release' || m.type === 'task.complete') && m.token === '5'))
              return 'settled';
            if (r.filter((m) => m.type === 'hello').length > hellos) return 'new session';
            const lastBeat = coordinator.heartbeatAt();
            if (Date.now() - Math.max(lastBeat, grantedAt) > ttlMs) return 'session abandoned';
            return undefined;
          },
          3 * ttlMs,
        ).catch(() => 'still held by a live session');
        expect(freed, `worker events: ${events.join(', ')}`).toMatch(/settled|new session|abandoned/);
      } finally {
        await worker.close(1_000);
        coordinator.close();
      }
    },
  );
});
