/**
 * The worker SDK: a {@link Worker} runs `concurrency` slots; each acquires a task lease from the
 * coordinator tier, runs the handler with an AbortSignal that fires when the lease is lost, and
 * writes the result to the sink under the grant's token and capability. On success the task is
 * completed; on a handler failure the failure is reported (`task.fail`): the coordinator retries
 * the task after its backoff, or fails it (attempts used up, or a {@link NonRetryableError}).
 *
 * ```ts
 * const worker = new Worker({ coordinators, sink: { url }, credentials, handler });
 * worker.on('completed', (e) => log(e.taskId));
 * const done = worker.run();      // resolves once closed
 * ...
 * await worker.close();           // finish or release in-flight tasks, then disconnect
 * ```
 *
 * Safety does not depend on anything here: the sink's fence refuses writes from a lost lease.
 * The SDK's own deadline check only saves pointless work.
 */
import { performance } from 'node:perf_hooks';
import {
  defaultResultId,
  LeaseholdError,
  MAX_ACQUIRE_WAIT_MS,
  RepeatGate,
  parseToken,
  type Grant,
  type JsonValue,
} from '@leasehold/protocol';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import { pino, type Logger } from 'pino';
import { webSocketTransport, type CoordinatorTransport, type WorkerRequest } from './connection.js';
import { backoffDelayMs } from './core/backoff.js';
import { unguessableId } from './random-ids.js';
import { describeFailure, LeaseLostError, WriteRefusedError } from './errors.js';
import { WorkerSession } from './session.js';

export interface Task {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: JsonValue;
  readonly attempt: number;
}

export interface WriteOptions {
  /** Idempotency key. Defaults to `task:<taskId>` (the business identity, never random). */
  readonly resultId?: string;
}

export interface WriteOutcome {
  readonly outcome: 'written' | 'replayed';
  readonly resultId: string;
  readonly fence: bigint;
}

export interface TaskContext {
  readonly resource: string;
  readonly token: bigint;
  /** Fires when the lease is lost or may be: session expired, revoked, coordinator unreachable past the deadline. */
  readonly signal: AbortSignal;
  /** Fenced write of the result to the sink. Throws LeaseLostError / WriteRefusedError when it cannot land. */
  write(payload: JsonValue, options?: WriteOptions): Promise<WriteOutcome>;
  /** Milliseconds left on the worker's conservative view of the lease. */
  remainingMs(): number;
  readonly logger: Logger;
}

/** Returns the result to write (if it did not call `ctx.write` itself). */
export type TaskHandler = (task: Task, ctx: TaskContext) => Promise<JsonValue | undefined> | JsonValue | undefined;

export interface WriteHookInfo {
  readonly taskId: string;
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
}

/** What the worker needs of the sink: a fenced write (a {@link SinkClient}, or a test double). */
export type SinkWriter = Pick<SinkClient, 'write' | 'close'> & Partial<Pick<SinkClient, 'health'>>;

/**
 * How the worker proves who it is: its own credential (a key id and secret the coordinators bind
 * to this worker id), or — INSECURE, for local development only — a shared key with which any
 * worker may claim any id. (A client certificate, with `tls.cert`/`tls.key`, works alone too:
 * pass `{ certificate: true }`.)
 */
export type WorkerCredentials =
  { readonly keyId: string; readonly secret: string } | { readonly certificate: true } | { readonly workerKey: string };

export interface WorkerOptions {
  readonly coordinators: readonly string[];
  readonly sink: { readonly url: string; readonly timeoutMs?: number } | SinkWriter;
  readonly credentials: WorkerCredentials;
  /** TLS for https:// coordinators and sink: the CA to pin, and a client certificate (mTLS). */
  readonly tls?: TlsClientOptions;
  readonly handler: TaskHandler;
  readonly workerId?: string;
  readonly incarnation?: string;
  readonly concurrency?: number;
  readonly logger?: Logger;
  /** How long to wait after `lease.none` before asking again (upper bound; jittered). Default 500 ms. */
  readonly idleBackoffMs?: number;
  /**
   * Long poll: how long the coordinator may hold a `lease.acquire` while nothing is grantable,
   * answering as soon as a task is (`waitMs`). 0 turns it off. Default 1000 ms.
   */
  readonly acquireWaitMs?: number;
  readonly requestTimeoutMs?: number;
  /**
   * Called after the deadline check, immediately before the write is sent. Tests and the chaos
   * runner use it to pause a worker exactly where a real pause hurts most.
   */
  readonly beforeWrite?: (info: WriteHookInfo) => void | Promise<void>;
  /** How coordinators are reached (default: WebSocket). Tests replace it. */
  readonly transport?: CoordinatorTransport;
}

export type WorkerEvent =
  | { readonly type: 'granted'; readonly taskId: string; readonly resource: string; readonly token: bigint }
  | {
      readonly type: 'written';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      readonly outcome: string;
    }
  | {
      readonly type: 'refused';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      readonly code: string;
    }
  | { readonly type: 'completed'; readonly taskId: string; readonly resource: string; readonly token: bigint }
  | {
      readonly type: 'released';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      readonly reason: string;
    }
  | {
      readonly type: 'failed';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      /** The error's name and message as reported. */
      readonly error: { readonly name: string; readonly message: string };
      /** What the coordinator decided: tried again from `notBeforeMs`, or failed for good. */
      readonly outcome: 'retrying' | 'failed';
      readonly notBeforeMs?: number;
    }
  | {
      /**
       * The worker stopped itself: every coordinator refused its credentials (UNAUTHENTICATED /
       * FORBIDDEN) — a configuration error that retrying cannot fix.
       */
      readonly type: 'fatal';
      readonly code: string;
      readonly message: string;
    }
  | {
      readonly type: 'lease-lost';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      readonly reason: string;
    };

/** The worker's lifecycle: created -> running -> closing -> closed. */
export const WorkerState = {
  CREATED: 'created',
  RUNNING: 'running',
  CLOSING: 'closing',
  CLOSED: 'closed',
} as const;
export type WorkerState = (typeof WorkerState)[keyof typeof WorkerState];

/** Listeners by event type; `'*'` hears every event. */
export type WorkerEventType = WorkerEvent['type'] | 'state' | '*';
export type WorkerEventOf<T extends WorkerEventType> = T extends '*'
  ? WorkerEvent | StateEvent
  : T extends 'state'
    ? StateEvent
    : Extract<WorkerEvent, { type: T }>;
export interface StateEvent {
  readonly type: 'state';
  readonly state: WorkerState;
}

export interface WorkerStats {
  granted: number;
  completed: number;
  /** Handler failures reported to the coordinator. */
  failed: number;
  refused: number;
  released: number;
  lost: number;
}

interface Running {
  readonly grant: Grant;
  readonly token: bigint;
  readonly controller: AbortController;
}

const SHUTDOWN = 'worker shutting down';
/** Why a lease is given up when only the worker's own conservative deadline has passed. */
const LOCAL_DEADLINE = 'local deadline passed';

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

const unguessable = unguessableId; // request ids, default worker ids and incarnations

export class Worker {
  readonly workerId: string;
  readonly incarnation: string;
  readonly stats: WorkerStats = { granted: 0, completed: 0, failed: 0, refused: 0, released: 0, lost: 0 };
  readonly #o: WorkerOptions;
  readonly #log: Logger;
  readonly #sink: SinkWriter;
  readonly #ownsSink: boolean;
  readonly #session: WorkerSession;
  readonly #concurrency: number;
  readonly #acquireWaitMs: number;
  readonly #requestTimeoutMs: number;
  readonly #listeners = new Map<WorkerEventType, Set<(event: never) => void>>();
  readonly #running = new Map<string, Running>(); // `${resource}@${token}`
  /** Every grant ever run: a grant is never run twice. */
  readonly #started = new Set<string>();
  /** One log line per failure loop (acquire refusals, slot failures), with the count of repeats. */
  readonly #repeats = new RepeatGate();
  #state: WorkerState = WorkerState.CREATED;
  #slots: Promise<void>[] = [];
  #done: Promise<void> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: WorkerOptions) {
    this.#o = options;
    this.workerId = options.workerId ?? `worker-${unguessable().slice(0, 8)}`;
    this.incarnation = options.incarnation ?? unguessable().slice(0, 16);
    this.#concurrency = options.concurrency ?? 1;
    this.#log = (options.logger ?? pino({ level: 'silent' })).child({
      workerId: this.workerId,
      incarnation: this.incarnation,
    });
    const sink = options.sink;
    this.#ownsSink = !('write' in sink);
    this.#sink =
      'write' in sink
        ? sink
        : new SinkClient({
            url: sink.url,
            timeoutMs: sink.timeoutMs ?? 5_000,
            ...(options.tls === undefined ? {} : { tls: options.tls }),
          });
    const credentials = options.credentials;
    this.#acquireWaitMs = Math.min(MAX_ACQUIRE_WAIT_MS, Math.max(0, options.acquireWaitMs ?? 1_000));
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
    this.#session = new WorkerSession(
      {
        coordinators: options.coordinators,
        key:
          'workerKey' in credentials
            ? credentials.workerKey
            : 'keyId' in credentials
              ? `${credentials.keyId}:${credentials.secret}`
              : '',
        ...(options.tls === undefined ? {} : { tls: options.tls }),
        workerId: this.workerId,
        incarnation: this.incarnation,
        capacity: this.#concurrency,
        logger: this.#log,
        requestTimeoutMs: this.#requestTimeoutMs,
        connectTimeoutMs: 3_000,
        backoff: { initialMs: 100, maxMs: 2_000 },
        nowMs: () => performance.now(),
        random: Math.random,
        transport: options.transport ?? webSocketTransport,
      },
      {
        onSessionStarted: () => undefined,
        onSessionLost: (reason) => {
          this.#abortAll(reason);
        },
        onLeaseRevoked: (resource, token, reason) =>
          this.#running.get(`${resource}@${token}`)?.controller.abort(new LeaseLostError(`revoked: ${reason}`)),
        onDeadlinePassed: () => {
          this.#abortAll(LOCAL_DEADLINE);
        },
        onCredentialsRefused: (err, consecutive) => {
          if (consecutive < Math.max(1, options.coordinators.length) || this.#stopping) return;
          this.failure = err;
          const message =
            `every coordinator refused this worker's credentials (${err.code}): check its key id and ` +
            `secret (or client certificate) against the coordinators' WORKER_CREDENTIALS / TLS_CLIENT_CA`;
          this.#log.error({ code: err.code }, message);
          this.#emit({ type: 'fatal', code: err.code, message });
          void this.close(0);
        },
      },
    );
  }

  /** Set when the worker stopped itself on an error retrying cannot fix (see the `fatal` event). */
  failure: LeaseholdError | undefined;

  /**
   * Is the sink reachable and ready (TLS and URL right)? A worker checks it at start and logs a
   * problem; its readiness endpoint asks again. Undefined when the sink writer cannot tell.
   */
  async checkSink(): Promise<boolean | undefined> {
    if (this.#sink.health === undefined) return undefined;
    try {
      return (await this.#sink.health()).ready;
    } catch {
      return false;
    }
  }

  get state(): WorkerState {
    return this.#state;
  }

  /** True while a session with a coordinator is open. */
  get connected(): boolean {
    return this.#session.connected;
  }

  /** Start: connect, then acquire and run tasks until {@link close}. Resolves once closed. */
  run(): Promise<void> {
    if (this.#done !== undefined) return this.#done;
    this.#setState(WorkerState.RUNNING);
    void this.checkSink().then((ok) => {
      if (ok === false) {
        this.#log.error(
          { sink: 'url' in this.#o.sink ? this.#o.sink.url : undefined },
          'the sink does not answer (check the sink URL and its CA); tasks will fail until it does',
        );
      }
    });
    this.#session.start();
    this.#slots = Array.from({ length: this.#concurrency }, (_, i) => this.#slot(i));
    this.#done = Promise.allSettled(this.#slots).then(() => this.#closing ?? Promise.resolve());
    return this.#done;
  }

  /**
   * Stop acquiring; let in-flight tasks finish for up to `graceMs`, then abort them and release
   * their leases; disconnect. Idempotent.
   */
  close(graceMs = 10_000): Promise<void> {
    this.#closing ??= (async () => {
      if (this.#state === WorkerState.CREATED) {
        this.#setState(WorkerState.CLOSED);
        if (this.#ownsSink) await this.#sink.close();
        return;
      }
      this.#setState(WorkerState.CLOSING);
      const all = Promise.allSettled(this.#slots);
      const timer = setTimeout(() => {
        this.#abortAll(SHUTDOWN);
      }, graceMs);
      // A handler that ignores its AbortSignal cannot hold shutdown hostage for ever.
      await Promise.race([all, sleep(graceMs + 5_000)]);
      clearTimeout(timer);
      this.#session.stop();
      if (this.#ownsSink) await this.#sink.close();
      this.#setState(WorkerState.CLOSED);
    })();
    return this.#closing;
  }

  on<T extends WorkerEventType>(type: T, listener: (event: WorkerEventOf<T>) => void): this {
    let set = this.#listeners.get(type);
    if (set === undefined) this.#listeners.set(type, (set = new Set()));
    set.add(listener);
    return this;
  }

  off<T extends WorkerEventType>(type: T, listener: (event: WorkerEventOf<T>) => void): this {
    this.#listeners.get(type)?.delete(listener);
    return this;
  }

  #emit(event: WorkerEvent | StateEvent): void {
    for (const type of [event.type, '*'] as const) {
      for (const listener of this.#listeners.get(type) ?? []) {
        try {
          (listener as (e: WorkerEvent | StateEvent) => void)(event);
        } catch (err) {
          this.#log.error({ err }, 'worker event listener threw');
        }
      }
    }
  }

  #setState(state: WorkerState): void {
    this.#state = state;
    this.#emit({ type: 'state', state });
  }

  get #stopping(): boolean {
    return this.#state === WorkerState.CLOSING || this.#state === WorkerState.CLOSED;
  }

  #abortAll(reason: string): void {
    for (const r of this.#running.values()) r.controller.abort(new LeaseLostError(reason));
  }

  #request(message: WorkerRequest) {
    return this.#session.request(message);
  }

  async #slot(index: number): Promise<void> {
    while (!this.#stopping) {
      try {
        const grant = await this.#acquireOnce();
        if (grant !== undefined) await this.#runGrant(grant);
      } catch (err) {
        const gate = this.#repeats.note(`slot ${index}`, performance.now());
        if (gate.log)
          this.#log.error({ err, slot: index, repeated: gate.suppressed }, 'worker slot failed; continuing');
        await sleep(500);
      }
    }
  }

  async #acquireOnce(): Promise<Grant | undefined> {
    const requestId = unguessable();
    const idleBackoffMs = this.#o.idleBackoffMs ?? 500;
    // Retry the same request id until a definite answer: the coordinator returns the same grant.
    for (let attempt = 0; !this.#stopping; attempt++) {
      try {
        const sentAtMs = performance.now();
        const waitMs = this.#acquireWaitMs;
        const reply = await this.#session.request(
          { type: 'lease.acquire', requestId, ...(waitMs > 0 ? { waitMs } : {}) },
          this.#requestTimeoutMs + waitMs,
        );
        if (reply.type === 'lease.granted') return reply;
        if (reply.type === 'lease.none') {
          // The coordinator already waited (a long poll): ask again at once. One that answered at
          // once (it predates waitMs, or waiting is off) gets the idle back-off.
          if (waitMs > 0 && performance.now() - sentAtMs >= waitMs / 2) return undefined;
          await sleep(Math.min(reply.retryAfterMs || idleBackoffMs, idleBackoffMs) * (0.5 + Math.random() / 2));
          return undefined;
        }
        if (reply.type === 'error' && !reply.retryable) {
          const gate = this.#repeats.note(`acquire ${reply.code}`, performance.now());
          if (gate.log) this.#log.warn({ code: reply.code, repeated: gate.suppressed }, 'acquire refused');
          await sleep(idleBackoffMs);
          return undefined;
        }
      } catch (err) {
        if (!(err instanceof LeaseholdError) || !err.retryable) throw err;
        this.#log.debug({ err }, 'acquire retry');
      }
      await sleep(backoffDelayMs(attempt, { initialMs: 50, maxMs: 1_000 }, Math.random));
    }
    return undefined;
  }

  async #runGrant(grant: Grant): Promise<void> {
    const { workerId, incarnation } = this;
    const token = parseToken(grant.token);
    const key = `${grant.resource}@${grant.token}`;
    if (this.#started.has(key)) {
      this.#log.error({ resource: grant.resource, token: grant.token }, 'grant delivered twice; not running it again');
      return;
    }
    this.#started.add(key);
    this.stats.granted += 1;
    const controller = new AbortController();
    this.#running.set(key, { grant, token, controller });
    const log = this.#log.child({ taskId: grant.taskId, resource: grant.resource, token: grant.token });
    const base = { taskId: grant.taskId, resource: grant.resource, token };
    log.info({ attempt: grant.attempt }, 'lease granted');
    this.#emit({ type: 'granted', ...base });
    let written: WriteOutcome | undefined;
    let lastResultId = defaultResultId(grant.taskId);

    const write = async (payload: JsonValue, opts?: WriteOptions): Promise<WriteOutcome> => {
      const resultId = opts?.resultId ?? defaultResultId(grant.taskId);
      lastResultId = resultId;
      if (controller.signal.aborted)
        throw controller.signal.reason instanceof Error ? controller.signal.reason : new LeaseLostError('aborted');
      if (!this.#session.deadline.isValidAt(performance.now())) {
        controller.abort(new LeaseLostError(LOCAL_DEADLINE));
        throw new LeaseLostError(`${LOCAL_DEADLINE} before the write`);
      }
      await this.#o.beforeWrite?.({ taskId: grant.taskId, resource: grant.resource, token, resultId });
      const result = await this.#sink.write({
        resource: grant.resource,
        token,
        resultId,
        workerId,
        incarnation,
        capability: grant.capability,
        payload,
      });
      if (!result.ok) {
        this.stats.refused += 1;
        log.warn({ code: result.code, fence: result.fence.toString() }, 'write refused by the sink');
        this.#emit({ type: 'refused', ...base, code: result.code });
        if (result.code !== 'RESULT_CONFLICT') controller.abort(new WriteRefusedError(result.code, result.fence));
        throw new WriteRefusedError(result.code, result.fence);
      }
      written = { outcome: result.outcome, resultId, fence: result.fence };
      log.info({ resultId, outcome: result.outcome }, 'result written');
      this.#emit({ type: 'written', ...base, outcome: result.outcome });
      return written;
    };

    const ctx: TaskContext = {
      resource: grant.resource,
      token,
      signal: controller.signal,
      write,
      remainingMs: () => this.#session.deadline.remainingMs(performance.now()),
      logger: log,
    };
    const task: Task = {
      taskId: grant.taskId,
      resource: grant.resource,
      payload: grant.payload,
      attempt: grant.attempt,
    };
    const held = { resource: grant.resource, token: grant.token, incarnation };
    const finish = async (
      kind: 'complete' | 'release' | 'fail',
      resultId: string,
      reason?: string,
      failure?: { name: string; message: string; retryable: boolean },
    ): Promise<void> => {
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          const reply =
            kind === 'complete'
              ? await this.#request({ type: 'task.complete', taskId: grant.taskId, resultId, ...held })
              : kind === 'fail' && failure !== undefined
                ? await this.#request({ type: 'task.fail', taskId: grant.taskId, ...held, error: failure })
                : await this.#request({ type: 'lease.release', ...held, reason: (reason ?? '').slice(0, 500) });
          if (reply.type === 'task.failed') {
            this.stats.failed += 1;
            log.warn({ outcome: reply.outcome, notBeforeMs: reply.notBeforeMs }, 'task attempt failed');
            this.#emit({
              type: 'failed',
              ...base,
              error: { name: failure?.name ?? 'Error', message: failure?.message ?? '' },
              outcome: reply.outcome,
              ...(reply.notBeforeMs === undefined ? {} : { notBeforeMs: reply.notBeforeMs }),
            });
          } else if (reply.type === 'task.completed') {
            this.stats.completed += 1;
            log.info({ resultId }, 'task completed');
            this.#emit({ type: 'completed', ...base });
          } else if (reply.type === 'lease.released') {
            this.stats.released += 1;
            log.info({ reason }, 'lease released');
            this.#emit({ type: 'released', ...base, reason: reason ?? '' });
          } else if (reply.type === 'error') {
            if (kind === 'fail' && reply.code === 'INVALID_MESSAGE') {
              // A coordinator older than task.fail: give the lease back instead.
              kind = 'release';
              continue;
            }
            log.warn({ code: reply.code }, `${kind} refused`);
            if (reply.retryable) throw new LeaseholdError(reply.code, reply.message);
          }
          return;
        } catch (err) {
          if (!(err instanceof LeaseholdError) || !err.retryable) return;
          await sleep(backoffDelayMs(attempt, { initialMs: 50, maxMs: 1_000 }, Math.random));
        }
      }
    };
    try {
      const value = await this.#o.handler(task, ctx);
      if (written === undefined) {
        if (value === undefined)
          throw new LeaseholdError('INVALID_MESSAGE', 'handler returned no result and wrote none');
        await write(value);
      }
      await finish('complete', written?.resultId ?? defaultResultId(grant.taskId));
    } catch (err) {
      if (err instanceof WriteRefusedError && err.code === 'RESULT_CONFLICT') {
        // The task's result is already stored (an earlier holder's): the task is done.
        await finish('complete', lastResultId);
      } else if (
        this.#stopping &&
        controller.signal.reason instanceof LeaseLostError &&
        controller.signal.reason.reason === SHUTDOWN
      ) {
        await finish('release', '', SHUTDOWN);
      } else if (err instanceof LeaseLostError || err instanceof WriteRefusedError || controller.signal.aborted) {
        this.stats.lost += 1;
        const reason = err instanceof Error ? err.message : String(err);
        log.warn({ reason }, 'lease lost; task left to the next holder');
        this.#emit({ type: 'lease-lost', ...base, reason });
        // Only our own conservative clock said so: the coordinator may still count the lease ours
        // (a welcome that came late leaves the local deadline behind until the first heartbeat
        // ack). Give it back, or the task stays leased for as long as this session lives. A lease
        // that is really gone refuses the release, which changes nothing.
        const cause = controller.signal.reason instanceof LeaseLostError ? controller.signal.reason : err;
        if (cause instanceof LeaseLostError && cause.reason.startsWith(LOCAL_DEADLINE)) {
          await finish('release', '', LOCAL_DEADLINE);
        }
      } else {
        // The handler failed (or the write could not be made: sink unreachable, capability
        // refused): the coordinator decides between a retry after the backoff and failure.
        const failure = describeFailure(err);
        log.warn({ err }, 'handler failed; reporting the failure');
        await finish('fail', '', failure.message, failure);
      }
    } finally {
      this.#running.delete(key);
    }
  }
}

/** `new Worker(options)`, started: `run()` is called and its promise kept by the worker. */
export function startWorker(options: WorkerOptions): Worker {
  const worker = new Worker(options);
  void worker.run();
  return worker;
}
