/**
 * The worker SDK: a {@link Worker} runs `concurrency` slots; each acquires a task lease from the
 * coordinator tier (acquire.ts), runs the handler with an AbortSignal that fires when the lease is
 * lost, and ends the attempt (attempt.ts): the result written to the sink under the grant's token
 * and capability (or stored by the handler's own fenced transaction) and the task completed, or the
 * failure reported — the coordinator retries after the task's backoff, or fails it.
 *
 * ```ts
 * const worker = new Worker({ coordinators, sink: { url }, credentials, workerId, handler });
 * worker.on('completed', (e) => log(e.taskId));
 * await worker.run();   // resolves once closed; rejects with the fatal error if the worker stopped itself
 * ...
 * await worker.close(); // finish or release in-flight tasks, then disconnect; leaves no timer or socket
 * ```
 *
 * Safety does not depend on anything here: the sink's fence refuses writes from a lost lease.
 * The SDK's own deadline check only saves pointless work.
 */
import { performance } from 'node:perf_hooks';
import { LeaseholdError, RepeatGate, type JsonValue } from '@leasehold/protocol';
import { SinkClient } from '@leasehold/sink-client';
import { pino, type Logger } from 'pino';
import type { AttemptDeps } from './attempt.js';
import { webSocketTransport } from './connection.js';
import { refusalAdvice, shouldStopOnRefusal, type FatalRefusal } from './core/refusals.js';
import { FatalWorkerError } from './errors.js';
import {
  StatusHub,
  WorkerEmitter,
  WorkerState,
  type WorkerEvent,
  type WorkerEventOf,
  type WorkerEventType,
  type WorkerStatus,
} from './events.js';
import { LOCAL_DEADLINE } from './fenced-write.js';
import { acquireWaitMs, compileOptions, type CompiledOptions, type WorkerOptions } from './options.js';
import { unguessableId } from './random-ids.js';
import { WorkerSession } from './session.js';
import { Slots } from './slots.js';
import type { SinkWriter, WorkerStats } from './types.js';

type MutableStats = { -readonly [K in keyof WorkerStats]: number };

/** The default logger: warnings and errors, one JSON line each, on stderr. */
function defaultLogger(): Logger {
  return pino({ level: 'warn', base: { service: 'leasehold-worker' } }, pino.destination({ dest: 2, sync: true }));
}

export class Worker<Payload = JsonValue, Result = JsonValue> {
  readonly workerId: string;
  readonly incarnation: string;
  readonly #o: CompiledOptions<Payload, Result>;
  readonly #log: Logger;
  readonly #sink: SinkWriter;
  readonly #ownsSink: boolean;
  readonly #session: WorkerSession;
  readonly #events: WorkerEmitter;
  readonly #status = new StatusHub();
  readonly #stats: MutableStats = { granted: 0, completed: 0, failed: 0, refused: 0, released: 0, lost: 0 };
  /** Aborted when closing begins: every wait between acquires ends at once. */
  readonly #stop = new AbortController();
  /** Aborted when the force time ran out: attempt reports stop retrying. */
  readonly #force = new AbortController();
  readonly #slots: Slots<Payload, Result>;
  #state: WorkerState = WorkerState.CREATED;
  #fatal: FatalWorkerError | undefined;
  #run: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  #signalHandlers: [NodeJS.Signals, () => void][] = [];

  /** Checks every option first: throws one ConfigError listing every problem. */
  constructor(options: WorkerOptions<Payload, Result>) {
    const o = compileOptions(options);
    this.#o = o;
    this.workerId = o.workerId ?? `worker-${unguessableId().slice(0, 8)}`;
    this.incarnation = o.incarnation ?? unguessableId().slice(0, 16);
    this.#log = (o.logger ?? defaultLogger()).child({ workerId: this.workerId, incarnation: this.incarnation });
    this.#events = new WorkerEmitter(() => this.#log);
    const sink = o.sink;
    this.#ownsSink = !('write' in sink);
    this.#sink =
      'write' in sink
        ? sink
        : new SinkClient({
            url: sink.url,
            timeoutMs: sink.timeoutMs ?? 5_000,
            ...(o.tls === undefined ? {} : { tls: o.tls }),
            ...(sink.writeBatching === undefined ? {} : { writeBatching: sink.writeBatching }),
          });
    this.#session = new WorkerSession(
      {
        coordinators: o.coordinators,
        key: o.credentialKey,
        ...(o.tls === undefined ? {} : { tls: o.tls }),
        workerId: this.workerId,
        incarnation: this.incarnation,
        capacity: o.maxConcurrency,
        queues: o.queues,
        logger: this.#log,
        requestTimeoutMs: o.requestTimeoutMs,
        connectTimeoutMs: o.connectTimeoutMs,
        backoff: o.reconnectBackoff,
        nowMs: () => performance.now(),
        random: Math.random,
        transport: o.transport ?? webSocketTransport,
      },
      {
        onSessionStarted: () => undefined,
        onSessionLost: (reason) => {
          this.#slots.abortAll(reason);
        },
        onLeaseRevoked: (resource, token, reason) => {
          this.#slots.abort(resource, token, `revoked: ${reason}`);
        },
        onDeadlinePassed: () => {
          this.#slots.abortAll(LOCAL_DEADLINE);
        },
        onRefused: (err, consecutive) => {
          if (!shouldStopOnRefusal(consecutive, o.coordinators.length) || this.#isStopping()) return;
          this.#stopOnFatal(err.code as FatalRefusal, err);
        },
        onStatus: (status) => {
          this.#status.publish(status);
        },
      },
    );
    const attempt: AttemptDeps<Payload, Result> = {
      handler: o.handler,
      payload: o.payload,
      writes: {
        workerId: this.workerId,
        incarnation: this.incarnation,
        sink: this.#sink,
        leaseValid: () => this.#session.deadline.isValidAt(performance.now()),
        remainingMs: () => this.#session.deadline.remainingMs(performance.now()),
        beforeWrite: o.beforeWrite,
        capabilityPublicKeys: o.capabilityPublicKeys,
      },
      report: {
        request: (message) => this.#session.request(message, o.requestTimeoutMs, this.#force.signal),
        requestCarrying: (message, next, carried) =>
          this.#session.requestCarrying(message, next, carried, o.requestTimeoutMs, this.#force.signal),
        attempts: o.reportAttempts,
        backoff: o.retryBackoff,
        random: Math.random,
        signal: this.#force.signal,
      },
      log: this.#log,
      stopping: () => this.#isStopping(),
      emit: (event) => {
        this.#events.emit(event);
      },
      count: (stat) => {
        this.#stats[stat] += 1;
      },
    };
    this.#slots = new Slots(
      {
        session: this.#session,
        acquire: {
          acquireWaitMs: () => acquireWaitMs(o.acquireWaitMs, this.#session.drains),
          idleBackoffMs: o.idleBackoffMs,
          requestTimeoutMs: o.requestTimeoutMs,
          retryBackoff: o.retryBackoff,
          nowMs: () => performance.now(),
          random: Math.random,
        },
        attempt,
        log: this.#log,
        // One log line per failure loop (acquire refusals, slot failures), with the count of repeats.
        repeats: new RepeatGate(),
        incarnation: this.incarnation,
        requestTimeoutMs: o.requestTimeoutMs,
        slotErrorDelayMs: o.slotErrorDelayMs,
        stopping: () => this.#isStopping(),
        stop: this.#stop.signal,
        force: this.#force,
      },
      o.concurrency,
    );
  }

  get state(): WorkerState {
    return this.#state;
  }

  /** True while a session with a coordinator is open. */
  get connected(): boolean {
    return this.#session.connected;
  }

  /** A snapshot of the counts (frozen; read again for newer ones). */
  get stats(): Readonly<WorkerStats> {
    return Object.freeze({ ...this.#stats });
  }

  /** Set when the worker stopped itself on an error retrying cannot fix (`run()` rejected with it). */
  get failure(): FatalWorkerError | undefined {
    return this.#fatal;
  }

  get concurrency(): number {
    return this.#slots.target;
  }

  /**
   * Run `n` tasks at once from now on (1..`maxConcurrency`): more slots start at once; surplus
   * slots end after their current task.
   */
  setConcurrency(n: number): void {
    if (!Number.isInteger(n) || n < 1 || n > this.#o.maxConcurrency) {
      throw new LeaseholdError(
        'INVALID_MESSAGE',
        `concurrency must be an integer in 1..${this.#o.maxConcurrency} (maxConcurrency), got ${String(n)}`,
      );
    }
    this.#slots.resize(n, this.#state === WorkerState.RUNNING);
  }

  /**
   * Is the sink reachable and ready (TLS and URL right)? The worker checks it at start and logs a
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

  /**
   * Connect, then acquire and run tasks until {@link close}. Resolves once closed; rejects with a
   * {@link FatalWorkerError} (code UNAUTHENTICATED, FORBIDDEN or PROTOCOL_VERSION_MISMATCH) when
   * the worker stopped itself because every coordinator refused it.
   */
  run(): Promise<void> {
    if (this.#run !== undefined) return this.#run;
    if (this.#state !== WorkerState.CREATED) {
      this.#run = Promise.reject(new LeaseholdError('SHUTTING_DOWN', 'the worker was closed before run()'));
      return this.#run;
    }
    this.#setState(WorkerState.RUNNING);
    for (const signal of this.#o.shutdown.signals) {
      const handler = () => {
        this.#log.info({ signal }, 'stopping: finishing or releasing in-flight tasks');
        void this.#beginClose({ reason: 'signal', signal });
      };
      process.once(signal, handler);
      this.#signalHandlers.push([signal, handler]);
    }
    void this.checkSink().then((ok) => {
      if (ok === false) {
        this.#log.error(
          { sink: 'url' in this.#o.sink ? this.#o.sink.url : undefined },
          'the sink does not answer (check the sink URL and its CA); tasks will fail until it does',
        );
      }
    });
    this.#session.start();
    this.#slots.fill();
    const closed = new Promise<void>((resolve, reject) => {
      this.once('closed', (e) => {
        if (e.error === undefined) resolve();
        else reject(e.error);
      });
    });
    this.#run = closed;
    return closed;
  }

  /**
   * Stop acquiring; let in-flight tasks finish for up to `graceMs` (option `shutdown.graceMs`),
   * then abort their signals and release their leases; after `forceMs` more, release the leases of
   * handlers that still run and close anyway. Resolves once the worker is closed: no timer, no
   * socket of it is left. Idempotent.
   */
  close(options?: number | { readonly graceMs?: number; readonly forceMs?: number }): Promise<void> {
    const opts = typeof options === 'number' ? { graceMs: options } : (options ?? {});
    return this.#beginClose({ reason: 'close' }, opts);
  }

  /** Status changes of the link to the coordinators, as they happen, until the worker is closed. */
  status(): AsyncIterableIterator<WorkerStatus> {
    return this.#status.open();
  }

  on<T extends WorkerEventType>(type: T, listener: (event: WorkerEventOf<T>) => void): this {
    this.#events.on(type, listener);
    return this;
  }

  once<T extends WorkerEventType>(type: T, listener: (event: WorkerEventOf<T>) => void): this {
    const wrapped = (event: WorkerEventOf<T>) => {
      this.#events.off(type, wrapped);
      listener(event);
    };
    this.#events.on(type, wrapped);
    return this;
  }

  off<T extends WorkerEventType>(type: T, listener: (event: WorkerEventOf<T>) => void): this {
    this.#events.off(type, listener);
    return this;
  }

  #emit(event: WorkerEvent): void {
    this.#events.emit(event);
  }

  #setState(state: WorkerState): void {
    this.#state = state;
    this.#emit({ type: 'state', state });
    this.#status.publish({ type: 'state', state });
  }

  #isStopping(): boolean {
    return this.#state === WorkerState.CLOSING || this.#state === WorkerState.CLOSED;
  }

  #stopOnFatal(code: FatalRefusal, cause: LeaseholdError): void {
    const what = code === 'PROTOCOL_VERSION_MISMATCH' ? 'protocol version' : 'credentials';
    const message = `${code}: every coordinator refused this worker's ${what} (${cause.message}); ${refusalAdvice(code)}`;
    const error = new FatalWorkerError(code, message, { cause, retryable: false });
    this.#fatal = error;
    this.#log.fatal({ code }, message);
    // No session was open (every coordinator refused): nothing to give back; stop reconnecting now.
    void this.#session.stop();
    this.#emit({ type: 'error', error, fatal: true });
    void this.#beginClose({ reason: 'fatal' }, { graceMs: 0 });
  }

  #beginClose(
    why: { readonly reason: 'close' | 'signal' | 'fatal'; readonly signal?: NodeJS.Signals },
    opts: { readonly graceMs?: number; readonly forceMs?: number } = {},
  ): Promise<void> {
    this.#closing ??= this.#closeNow(
      why,
      opts.graceMs ?? this.#o.shutdown.graceMs,
      opts.forceMs ?? this.#o.shutdown.forceMs,
    );
    return this.#closing;
  }

  async #closeNow(
    why: { readonly reason: 'close' | 'signal' | 'fatal'; readonly signal?: NodeJS.Signals },
    graceMs: number,
    forceMs: number,
  ): Promise<void> {
    const wasRunning = this.#state === WorkerState.RUNNING;
    this.#setState(WorkerState.CLOSING);
    this.#emit({ type: 'closing', reason: why.reason, ...(why.signal === undefined ? {} : { signal: why.signal }) });
    for (const [signal, handler] of this.#signalHandlers.splice(0)) process.off(signal, handler);
    this.#stop.abort();
    // Long polls in flight answer now (their answer is awaited: a grant in it is given back).
    this.#session.drain();
    if (wasRunning) await this.#slots.drain(graceMs, forceMs);
    await this.#session.stop();
    if (this.#ownsSink) await this.#sink.close();
    this.#setState(WorkerState.CLOSED);
    this.#status.end();
    this.#emit({ type: 'closed', ...(this.#fatal === undefined ? {} : { error: this.#fatal }) });
  }
}

/**
 * `new Worker(options)`, started: `run()` is called; its rejection (a fatal error) is kept in
 * `worker.failure` and told by the `error` event, not thrown. Prefer `await new Worker(o).run()`.
 */
export function startWorker<Payload = JsonValue, Result = JsonValue>(
  options: WorkerOptions<Payload, Result>,
): Worker<Payload, Result> {
  const worker = new Worker(options);
  worker.run().catch(() => undefined);
  return worker;
}
