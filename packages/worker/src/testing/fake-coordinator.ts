/**
 * A scripted coordinator behind the worker's transport seam, and a sink that records writes: the
 * unit tests' doubles (no sockets). Not exported from the package.
 */
import { pino } from 'pino';
import {
  FEATURE_COMPLETE_NEXT,
  FEATURE_SESSION_DRAIN,
  LeaseholdError,
  PROTOCOL_VERSION,
  type CoordinatorMessage,
  type JsonValue,
} from '@leasehold/protocol';
import type { SinkClient } from '@leasehold/sink-client';
import {
  handled,
  type CompleteRequest,
  type ConnectionOptions,
  type CoordinatorTransport,
  type NextAcquire,
  type TransportConnection,
  type WorkerRequest,
} from '../connection.js';
import type { WorkerOptions } from '../options.js';
import type { SinkWriter } from '../types.js';

type WriteArgs = Parameters<SinkClient['write']>[0];

export interface FakeGrant {
  readonly taskId: string;
  readonly resource: string;
  readonly token: string;
  readonly payload: JsonValue;
}

/** Grants the tasks queued in `grants`, one per acquire. */
export class FakeCoordinator implements CoordinatorTransport {
  readonly requests: WorkerRequest[] = [];
  readonly grants: FakeGrant[] = [];
  /** Answer task.complete with LEASE_EXPIRED (the coordinator judged the session's deadline passed). */
  expireOnComplete = false;
  /** Refuse the upgrade of these URLs with this code (e.g. UNAUTHENTICATED). */
  readonly refuse = new Map<string, string>();
  /** Answer every hello with this error code (e.g. PROTOCOL_VERSION_MISMATCH). */
  helloError: string | undefined;
  /** While set, acquires wait for it before they are answered. */
  holdAcquires: Promise<void> | undefined;
  /** While set, completes wait for it before they are answered. */
  holdCompletes: Promise<void> | undefined;
  /**
   * Name `complete.next` in the welcome (the connection can always carry: the session decides by
   * the welcome). A carried acquire is recorded in `requests` as sent, inside its task.complete.
   */
  carries = false;
  /**
   * Name `session.drain` in the welcome and long-poll: an acquire with `waitMs` that finds no grant
   * waits until `session.drain` (then `lease.none`) or its `waitMs` runs out (counted in `pollsRunOut`).
   */
  drains = false;
  pollsRunOut = 0;
  #drained: (() => void) | undefined;
  readonly #drainedNow = new Promise<void>((resolve) => (this.#drained = resolve));
  connects = 0;
  #sessions = 0;
  push: ((m: CoordinatorMessage) => void) | undefined;

  connect(options: ConnectionOptions): Promise<TransportConnection> {
    this.connects += 1;
    const refused = this.refuse.get(options.url);
    if (refused !== undefined) {
      return Promise.reject(
        new LeaseholdError(refused as 'UNAUTHENTICATED', `coordinator ${options.url} refused the upgrade: HTTP 401`),
      );
    }
    this.push = options.onPush;
    let open = true;
    const reply = async (m: WorkerRequest, inReplyTo: string): Promise<CoordinatorMessage> => {
      switch (m.type) {
        case 'hello':
          if (this.helloError !== undefined)
            return {
              type: 'error',
              inReplyTo,
              code: this.helloError as 'INVALID_MESSAGE',
              message: 'no',
              retryable: false,
            };
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
            features: [
              ...(this.carries ? [FEATURE_COMPLETE_NEXT] : []),
              ...(this.drains ? [FEATURE_SESSION_DRAIN] : []),
            ],
          };
        case 'session.drain':
          this.#drained?.();
          return { type: 'session.draining', inReplyTo, sessionId: m.sessionId };
        case 'heartbeat':
          return { type: 'heartbeat.ack', inReplyTo, sessionId: m.sessionId, ttlMs: 60_000 };
        case 'lease.acquire': {
          if (this.holdAcquires !== undefined) await this.holdAcquires;
          const g = this.grants.shift();
          if (g === undefined && this.drains && (m.waitMs ?? 0) > 0) {
            let timer: NodeJS.Timeout | undefined;
            const ranOut = new Promise<boolean>(
              (resolve) =>
                (timer = setTimeout(() => {
                  resolve(true);
                }, m.waitMs)),
            );
            if (await Promise.race([ranOut, this.#drainedNow.then(() => false)])) this.pollsRunOut += 1;
            clearTimeout(timer);
          }
          if (g === undefined) return { type: 'lease.none', inReplyTo, requestId: m.requestId, retryAfterMs: 5 };
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
          if (this.holdCompletes !== undefined) await this.holdCompletes;
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
        return reply(m, `r${++seq}`);
      },
      requestCarrying: (m: CompleteRequest, _timeoutMs: number, next: NextAcquire) => {
        const nextId = `r${++seq}`;
        this.requests.push({ ...m, next: { ...next.acquire, id: nextId } });
        const completion = reply(m, `r${++seq}`);
        // As the coordinator does: the carried acquire is taken once the completion is answered.
        const acquire = () => reply({ type: 'lease.acquire', ...next.acquire }, nextId);
        return { reply: completion, next: handled(completion.then(acquire, acquire)) };
      },
      close: () => {
        open = false;
      },
      terminate: () => {
        open = false;
      },
    });
  }

  sent<T extends WorkerRequest['type']>(type: T): Extract<WorkerRequest, { type: T }>[] {
    return this.requests.filter((r): r is Extract<WorkerRequest, { type: T }> => r.type === type);
  }
}

export class FakeSink implements SinkWriter {
  readonly writes: WriteArgs[] = [];
  write(args: WriteArgs): ReturnType<SinkClient['write']> {
    this.writes.push(args);
    return Promise.resolve({ ok: true, outcome: 'written', fence: args.token });
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Resolves once `check()` holds (polled each turn of the event loop), or rejects after 5 s. */
export function until(check: () => boolean): Promise<void> {
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

/** A Worker's options over the fake coordinator and sink (no sockets): add the handler. */
export function fakeWorkerOptions(coordinator: FakeCoordinator, sink: FakeSink): Omit<WorkerOptions, 'handler'> {
  return {
    coordinators: ['ws://fake'],
    sink,
    credentials: { workerKey: 'a-shared-dev-key-of-some-length' },
    transport: coordinator,
    acquireWaitMs: 0,
    idleBackoffMs: 5,
    logger: pino({ level: 'silent' }),
  };
}
