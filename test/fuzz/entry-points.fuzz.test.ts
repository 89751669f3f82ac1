/**
 * Property-based fuzzing of the real entry points for a bounded time (LEASEHOLD_FUZZ_SECONDS per
 * target, default 15; `pnpm fuzz --duration 10m` for the long form): the sink's HTTP API, the
 * coordinator's admin HTTP API and its worker WebSocket, each a real server on a socket, against
 * real etcd and a real SQLite sink. Asserted for every input:
 *
 * - the server answers, and never with a 5xx (nor an INTERNAL error frame, nor close 1011);
 * - a refused request (400, 401, 403, 404, 405, 413, 415, 431) changes nothing: no sink decision
 *   is logged and etcd's revision does not move;
 * - the process survives (an unhandled rejection fails the run: vitest reports it).
 *
 * The last test proves the fuzzer can fail: a route with a planted 500 is found.
 */
import { rawHttp, startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { createHttpServer, Metrics, type TaskApi } from '@leasehold/coordinator';
import { PROTOCOL_VERSION } from '@leasehold/protocol';
import { Etcd3 } from 'etcd3';
import fc from 'fast-check';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Stack } from '../harness/coordinator.js';
import { frameArbitrary, requestArbitrary, type FuzzRequest } from './generators.js';

const SECONDS = Number(process.env.LEASEHOLD_FUZZ_SECONDS ?? '15');
const REFUSED = new Set([400, 401, 403, 404, 405, 413, 415, 431]);
const PREFIX = 'test/fuzz/';

let etcd: EtcdHandle;
let stack: Stack;
let coordinatorPort: number;
let sinkPort: number;
let etcdClient: Etcd3;

beforeAll(async () => {
  etcd = await startEtcd();
  // Sessions never expire during the run: a session end is a write no fuzzed frame caused.
  stack = await Stack.start({ etcd, prefix: PREFIX, sessionTtlMs: 600_000 });
  const c = await stack.coordinator();
  coordinatorPort = c.address.port;
  sinkPort = stack.sink.address?.port ?? 0;
  etcdClient = new Etcd3({ hosts: etcd.endpoints });
  // Some state for the inputs to hit: tasks, a fence, a result.
  await stack.admin(c.url).submit('t1', 'r1', { n: 1 });
  await stack.sinkClient.advance('r1', 5n);
}, 60_000);

afterAll(async () => {
  etcdClient.close();
  await stack.close();
  await etcd.stop();
});

async function etcdRevision(): Promise<bigint> {
  const res = await etcdClient.kv.range({ key: Buffer.from(`${PREFIX}none`) });
  return BigInt(res.header.revision);
}

async function lastDecision(): Promise<number> {
  const page = await stack.sinkClient.decisions(0, 1000);
  return page.decisions.at(-1)?.seq ?? 0;
}

const send = (port: number, req: FuzzRequest) =>
  rawHttp(port, {
    method: req.method,
    target: req.target,
    headers: req.headers,
    ...(req.body === undefined ? {} : { body: req.body }),
  });

const runFor = (seconds: number) => ({
  numRuns: 1_000_000,
  interruptAfterTimeLimit: seconds * 1_000,
  markInterruptAsFailure: false,
});

describe('fuzzing the entry points', () => {
  it(
    'sink HTTP: never a 5xx; a refused request changes nothing',
    async () => {
      const keys = () => [stack.keys.sinkKey, 'not-a-key-000000000000'];
      const arbitrary = requestArbitrary({
        routes: [
          '/v1/writes',
          '/v1/fences/advance',
          '/v1/fences/advance-batch',
          '/v1/resources/r1',
          '/v1/resources/r1/results/x',
          '/v1/decisions',
          '/healthz',
          '/readyz',
          '/metrics',
        ],
        keys: keys(),
        bodies: [
          {
            resource: 'r1',
            token: '5',
            resultId: 'x',
            workerId: 'w',
            incarnation: 'i',
            capability: 'v1.k1.x',
            payload: { a: 1 },
          },
          { resource: 'r1', token: '6' },
          { items: [{ resource: 'r1', token: '7' }] },
        ],
      });
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(arbitrary, async (req) => {
          runs += 1;
          const before = await lastDecision();
          const answer = await send(sinkPort, req);
          expect(answer.status, `${req.method} ${req.target}`).toBeGreaterThanOrEqual(100);
          expect(answer.status, `${req.method} ${req.target} ${req.body?.slice(0, 200) ?? ''}`).toBeLessThan(500);
          if (REFUSED.has(answer.status)) expect(await lastDecision(), `${req.method} ${req.target}`).toBe(before);
        }),
        runFor(SECONDS),
      );
      expect(runs).toBeGreaterThan(20);
    },
    (SECONDS + 60) * 1_000,
  );

  it(
    'coordinator admin HTTP: never a 5xx; a refused request leaves etcd untouched',
    async () => {
      const arbitrary = requestArbitrary({
        routes: [
          '/v1/tasks',
          '/v1/tasks/batch',
          '/v1/tasks/t1',
          '/v1/resources/r1',
          '/v1/worker',
          '/healthz',
          '/readyz',
          '/metrics',
        ],
        keys: [stack.keys.adminKey, stack.keys.workerKey, 'not-a-key-000000000000'],
        bodies: [
          { taskId: 'fz', resource: 'r9', payload: { a: 1 } },
          { tasks: [{ taskId: 'fz2', resource: 'r9', payload: 1 }] },
        ],
      });
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(arbitrary, async (req) => {
          runs += 1;
          const before = await etcdRevision();
          const answer = await send(coordinatorPort, req);
          expect(answer.status, `${req.method} ${req.target}`).toBeGreaterThanOrEqual(100);
          expect(answer.status, `${req.method} ${req.target} ${req.body?.slice(0, 200) ?? ''}`).toBeLessThan(500);
          if (REFUSED.has(answer.status)) expect(await etcdRevision(), `${req.method} ${req.target}`).toBe(before);
        }),
        runFor(SECONDS),
      );
      expect(runs).toBeGreaterThan(20);
    },
    (SECONDS + 60) * 1_000,
  );

  it(
    'coordinator WebSocket: no INTERNAL error and no 1011 close; refused frames leave etcd untouched',
    async () => {
      const url = `ws://127.0.0.1:${coordinatorPort}/v1/worker`;
      // Each reconnect (binary frames and abuse close the socket) resumes the one session: a
      // worker id holds a bounded number of sessions (MAX_SESSIONS_PER_WORKER).
      let sessionId: string | undefined;
      const open = async (): Promise<{
        ws: WebSocket;
        replies: Record<string, unknown>[];
        closed: () => number | undefined;
        settled: (done: () => boolean, timeoutMs: number) => Promise<void>;
      }> => {
        const ws = new WebSocket(url, { headers: { authorization: `Bearer ${stack.keys.workerKey}` } });
        const replies: Record<string, unknown>[] = [];
        let closed: number | undefined;
        // Waits on what the socket delivers: each message and the close re-check the waiter's condition.
        const waiters = new Set<() => void>();
        const wake = (): void => {
          for (const w of [...waiters]) w();
        };
        const settled = (done: () => boolean, timeoutMs: number): Promise<void> =>
          new Promise((resolve) => {
            const check = (): void => {
              if (!done()) return;
              clearTimeout(timer);
              waiters.delete(check);
              resolve();
            };
            // The bound: a frame the server does not answer at all is fuzzed on after it.
            const timer = setTimeout(() => {
              waiters.delete(check);
              resolve();
            }, timeoutMs);
            waiters.add(check);
            check();
          });
        ws.on('message', (data: Buffer) => {
          replies.push(JSON.parse(data.toString()) as Record<string, unknown>);
          wake();
        });
        ws.on('close', (code: number) => {
          closed = code;
          wake();
        });
        await new Promise<void>((resolve, reject) => {
          ws.once('open', () => {
            resolve();
          });
          ws.once('error', reject);
        });
        ws.send(
          JSON.stringify({
            type: 'hello',
            id: 'h',
            protocolVersion: PROTOCOL_VERSION,
            workerId: 'fz-w',
            incarnation: 'fz-i',
            capacity: 2,
            ...(sessionId === undefined ? {} : { resumeSessionId: sessionId }),
          }),
        );
        // The session exists before the first fuzzed frame (its creation is a legitimate write).
        await settled(() => closed !== undefined || replies.some((r) => r.type === 'welcome'), 2_000);
        const welcome = replies.find((r) => r.type === 'welcome');
        if (typeof welcome?.sessionId === 'string') sessionId = welcome.sessionId;
        return { ws, replies, closed: () => closed, settled };
      };
      let conn = await open();
      const templates = [
        { type: 'lease.acquire', id: 'a', requestId: 'q1' },
        { type: 'lease.renew', id: 'b', resource: 'r1', token: '5', incarnation: 'fz-i' },
        { type: 'lease.release', id: 'c', resource: 'r1', token: '5', incarnation: 'fz-i' },
        {
          type: 'task.complete',
          id: 'd',
          taskId: 't1',
          resultId: 'task:t1',
          resource: 'r1',
          token: '5',
          incarnation: 'fz-i',
        },
        { type: 'heartbeat', id: 'e', sessionId: 'abc' },
        { type: 'hello', id: 'f', protocolVersion: PROTOCOL_VERSION, workerId: 'fz-w', incarnation: 'fz-i' },
      ];
      let runs = 0;
      await fc.assert(
        fc.asyncProperty(frameArbitrary(templates), async (frame) => {
          runs += 1;
          if (conn.closed() !== undefined) {
            expect(conn.closed(), 'a socket closed by the server').not.toBe(1011);
            conn = await open();
          }
          const before = await etcdRevision();
          const seen = conn.replies.length;
          conn.ws.send(frame);
          // Wait for the answer (or the close) to this frame.
          const sent = conn;
          await sent.settled(() => sent.replies.length > seen || sent.closed() !== undefined, 1_000);
          const reply = conn.replies.at(-1);
          expect(reply?.code, String(frame).slice(0, 200)).not.toBe('INTERNAL');
          if (reply?.type === 'error' && conn.replies.length > seen && reply.code !== 'UNAVAILABLE') {
            expect(await etcdRevision(), String(frame).slice(0, 200)).toBe(before);
          }
        }),
        runFor(SECONDS),
      );
      conn.ws.close();
      expect(runs).toBeGreaterThan(20);
    },
    (SECONDS + 60) * 1_000,
  );
});

describe('the fuzzer can fail', () => {
  it('finds a planted 500 on one route', async () => {
    const tasks: TaskApi = {
      submit: () => Promise.reject(new Error('unused')),
      submitMany: () => Promise.reject(new Error('unused')),
      // The planted bug: a task id with a dot crashes the handler.
      get: (taskId) => (taskId.includes('.') ? Promise.reject(new TypeError('planted')) : Promise.resolve(undefined)),
      list: () => Promise.resolve({ tasks: [], next: null }),
      cancel: () => Promise.reject(new Error('unused')),
      retry: () => Promise.reject(new Error('unused')),
      purge: () => Promise.reject(new Error('unused')),
      resource: (resource) => Promise.resolve({ resource, owner: null, token: null, remainingMs: null }),
    };
    const app = createHttpServer({
      adminKeys: ['planted-admin-key-000000'],
      maxPayloadBytes: 65_536,
      tasks,
      metrics: new Metrics(),
      log: pino({ level: 'silent' }),
      readiness: () => Promise.resolve({ ready: true, degraded: false, checks: {}, problems: [] }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const arbitrary = requestArbitrary({
        routes: ['/v1/tasks/t1', '/healthz'],
        keys: ['planted-admin-key-000000'],
        bodies: [{ a: 1 }],
      });
      const result = await fc.check(
        fc.asyncProperty(arbitrary, async (req) => (await send(port, req)).status < 500),
        runFor(30),
      );
      expect(result.failed, 'the fuzzer should have found the planted 500').toBe(true);
    } finally {
      await app.close();
    }
  }, 60_000);
});
