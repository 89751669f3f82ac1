/**
 * The Worker over an injected transport and sink (no sockets): its lifecycle and events, the
 * handler's AbortSignal, unguessable request ids, and that a grant is written under its own token
 * and completed exactly once.
 */
import { PROTOCOL_VERSION, type CoordinatorMessage, type JsonValue } from '@leasehold/protocol';
import type { SinkClient } from '@leasehold/sink-client';
import { describe, expect, it } from 'vitest';
import type { ConnectionOptions, CoordinatorTransport, TransportConnection, WorkerRequest } from './connection.js';
import { Worker, type SinkWriter, type WorkerEventOf } from './worker.js';

type WriteArgs = Parameters<SinkClient['write']>[0];

/** A scripted coordinator: grants the tasks queued in `grants`, one per acquire. */
class FakeCoordinator implements CoordinatorTransport {
  readonly requests: WorkerRequest[] = [];
  readonly grants: { taskId: string; resource: string; token: string; payload: JsonValue }[] = [];
  /** Answer task.complete with LEASE_EXPIRED (the coordinator judged the session's deadline passed). */
  expireOnComplete = false;
  #sessions = 0;
  push: ((m: CoordinatorMessage) => void) | undefined;

  connect(options: ConnectionOptions): Promise<TransportConnection> {
    this.push = options.onPush;
    let open = true;
    const reply = (m: WorkerRequest, inReplyTo: string): CoordinatorMessage => {
      switch (m.type) {
        case 'hello':
          return {
            type: 'welcome',
            inReplyTo,
            protocolVersion: PROTOCOL_VERSION,
            sessionId: m.resumeSessionId ?? `abc${++this.#sessions}`,
            workerId: m.workerId,
            incarnation: m.incarnation,
            coordinatorId: 'fake',
            resumed: false,
            ttlMs: 60_000,
            heartbeatIntervalMs: 20_000,
          };
        case 'heartbeat':
          return { type: 'heartbeat.ack', inReplyTo, sessionId: m.sessionId, ttlMs: 60_000 };
        case 'lease.acquire': {
          const g = this.grants.shift();
          if (g === undefined) return { type: 'lease.none', inReplyTo, requestId: m.requestId, retryAfterMs: 10 };
          return {
            type: 'lease.granted',
            inReplyTo,
            requestId: m.requestId,
            capability: 'cap',
            ttlMs: 60_000,
            attempt: 1,
            ...g,
          };
        }
        case 'task.complete':
          if (this.expireOnComplete)
            return {
              type: 'error',
              inReplyTo,
              code: 'LEASE_EXPIRED',
              message: 'the session deadline has passed',
              retryable: false,
            };
          return { type: 'task.completed', inReplyTo, taskId: m.taskId, resource: m.resource, token: m.token };
        case 'lease.release':
          return { type: 'lease.released', inReplyTo, resource: m.resource, token: m.token };
        case 'lease.renew':
          return { type: 'lease.renewed', inReplyTo, resource: m.resource, token: m.token, ttlMs: 60_000 };
        case 'task.fail':
          return {
            type: 'task.failed',
            inReplyTo,
            taskId: m.taskId,
            resource: m.resource,
            token: m.token,
            outcome: m.error.retryable ? 'retrying' : 'failed',
          };
      }
    };
    let seq = 0;
    return Promise.resolve({
      url: options.url,
      get isOpen() {
        return open;
      },
      request: (m: WorkerRequest) => {
        this.requests.push(m);
        return Promise.resolve(reply(m, `r${++seq}`));
      },
      close: () => {
        open = false;
      },
      terminate: () => {
        open = false;
      },
    });
  }
}

class FakeSink implements SinkWriter {
  readonly writes: WriteArgs[] = [];
  write(args: WriteArgs): ReturnType<SinkClient['write']> {
    this.writes.push(args);
    return Promise.resolve({ ok: true, outcome: 'written', fence: args.token });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

function until(check: () => boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = () => {
      if (check()) resolve();
      else if (Date.now() - started > 5_000) reject(new Error('condition not reached'));
      else setImmediate(poll);
    };
    poll();
  });
}

function worker(coordinator: FakeCoordinator, sink: FakeSink, handler = (t: { payload: JsonValue }) => t.payload) {
  return new Worker({
    coordinators: ['ws://fake'],
    sink,
    credentials: { workerKey: 'k' },
    transport: coordinator,
    acquireWaitMs: 0,
    idleBackoffMs: 5,
    handler,
  });
}

describe('Worker', () => {
  it('runs a grant once: writes under its token with the business result id, then completes', async () => {
    const coordinator = new FakeCoordinator();
    const sink = new FakeSink();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '42', payload: { n: 1 } });
    const w = worker(coordinator, sink);
    const completed: WorkerEventOf<'completed'>[] = [];
    w.on('completed', (e) => completed.push(e));
    const done = w.run();
    await until(() => completed.length === 1);
    expect(sink.writes).toEqual([
      expect.objectContaining({ resource: 'r1', token: 42n, resultId: 'task:t1', payload: { n: 1 } }),
    ]);
    expect(coordinator.requests.filter((r) => r.type === 'task.complete')).toEqual([
      expect.objectContaining({ taskId: 't1', resource: 'r1', token: '42', resultId: 'task:t1' }),
    ]);
    await w.close(100);
    await done;
    expect(w.state).toBe('closed');
  });

  it('moves through its states and tells listeners; off() stops telling', async () => {
    const w = worker(new FakeCoordinator(), new FakeSink());
    const states: string[] = [];
    const all: string[] = [];
    const onAll = (e: WorkerEventOf<'*'>) => all.push(e.type);
    w.on('state', (e) => states.push(e.state)).on('*', onAll);
    expect(w.state).toBe('created');
    const done = w.run();
    await until(() => w.connected);
    w.off('*', onAll);
    await w.close(100);
    await done;
    expect(states).toEqual(['running', 'closing', 'closed']);
    expect(all).toEqual(['state']);
  });

  it('asks with unguessable request ids (128 random bits, never a counter)', async () => {
    const coordinator = new FakeCoordinator();
    const w = worker(coordinator, new FakeSink());
    void w.run();
    await until(() => coordinator.requests.filter((r) => r.type === 'lease.acquire').length >= 5);
    await w.close(100);
    const ids = coordinator.requests.flatMap((r) => (r.type === 'lease.acquire' ? [r.requestId] : []));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).not.toContain(w.workerId);
      expect(id.length).toBeGreaterThanOrEqual(22);
    }
  });

  it("aborts the handler's signal when the coordinator revokes its lease, and does not complete", async () => {
    const coordinator = new FakeCoordinator();
    const sink = new FakeSink();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '7', payload: 1 });
    let aborted: unknown;
    const lost: WorkerEventOf<'lease-lost'>[] = [];
    const running = new Worker({
      coordinators: ['ws://fake'],
      sink,
      credentials: { workerKey: 'k' },
      transport: coordinator,
      acquireWaitMs: 0,
      handler: (_task, ctx) =>
        new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            aborted = ctx.signal.reason;
            reject(ctx.signal.reason as Error);
          });
          coordinator.push?.({ type: 'lease.revoked', resource: 'r1', token: '7', reason: 'cancelled' });
        }),
    });
    running.on('lease-lost', (e) => lost.push(e));
    void running.run();
    await until(() => lost.length === 1);
    expect(String(aborted)).toMatch(/revoked: cancelled/);
    expect(sink.writes).toEqual([]);
    expect(coordinator.requests.some((r) => r.type === 'task.complete')).toBe(false);
    await running.close(100);
  });

  it('a LEASE_EXPIRED answer ends the session for the worker: its next hello opens a fresh one, never resumes', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.expireOnComplete = true;
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '7', payload: 1 });
    const running = worker(coordinator, new FakeSink());
    void running.run();
    await until(() => coordinator.requests.filter((r) => r.type === 'hello').length >= 2);
    const hellos = coordinator.requests.filter((r) => r.type === 'hello');
    expect(coordinator.requests.some((r) => r.type === 'task.complete')).toBe(true);
    expect(hellos[1]).not.toHaveProperty('resumeSessionId');
    await running.close(100);
  });

  it('on close, a task that ignores its signal past the grace is released, not completed', async () => {
    const coordinator = new FakeCoordinator();
    coordinator.grants.push({ taskId: 't1', resource: 'r1', token: '9', payload: 1 });
    let started = false;
    const w = new Worker({
      coordinators: ['ws://fake'],
      sink: new FakeSink(),
      credentials: { workerKey: 'k' },
      transport: coordinator,
      acquireWaitMs: 0,
      handler: (_task, ctx) => {
        started = true;
        return new Promise((_resolve, reject) => {
          ctx.signal.addEventListener('abort', () => {
            reject(ctx.signal.reason as Error);
          });
        });
      },
    });
    void w.run();
    await until(() => started);
    await w.close(50);
    expect(coordinator.requests.filter((r) => r.type === 'lease.release')).toEqual([
      expect.objectContaining({ resource: 'r1', token: '9', reason: 'worker shutting down' }),
    ]);
    expect(w.stats).toMatchObject({ granted: 1, released: 1, completed: 0 });
  });
});
