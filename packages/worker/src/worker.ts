/**
 * The worker SDK: `startWorker(options)` runs `concurrency` slots; each acquires a task lease from
 * the coordinator tier, runs the handler with an AbortSignal that fires when the lease is lost,
 * and writes the result to the sink under the grant's token and capability. On success the task is
 * completed; on a handler failure the lease is released so the task can be retried.
 *
 * Safety does not depend on anything here: the sink's fence refuses writes from a lost lease.
 * The SDK's own deadline check only saves pointless work.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { defaultResultId, LeaseholdError, MAX_ACQUIRE_WAIT_MS, type Grant, type JsonValue } from '@leasehold/protocol';
import { SinkClient } from '@leasehold/sink-client';
import { pino, type Logger } from 'pino';
import { backoffDelayMs } from './core/backoff.js';
import { LeaseLostError, WriteRefusedError } from './errors.js';
import { WorkerSession } from './session.js';
import type { WorkerRequest } from './connection.js';

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

export interface WorkerOptions {
  readonly coordinators: readonly string[];
  readonly sink: { readonly url: string; readonly timeoutMs?: number } | SinkClient;
  readonly credentials: { readonly workerKey: string };
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
      readonly type: 'lease-lost';
      readonly taskId: string;
      readonly resource: string;
      readonly token: bigint;
      readonly reason: string;
    };

export interface Worker {
  readonly workerId: string;
  readonly incarnation: string;
  /** Stop acquiring; let in-flight tasks finish for up to `graceMs`, then abort and release them. */
  stop(graceMs?: number): Promise<void>;
  on(listener: (event: WorkerEvent) => void): void;
  readonly stats: { granted: number; completed: number; refused: number; released: number; lost: number };
}

interface Running {
  readonly grant: Grant;
  readonly token: bigint;
  readonly controller: AbortController;
}

export function startWorker(options: WorkerOptions): Worker {
  const workerId = options.workerId ?? `worker-${randomUUID().slice(0, 8)}`;
  const incarnation = options.incarnation ?? randomUUID().replaceAll('-', '').slice(0, 16);
  const concurrency = options.concurrency ?? 1;
  const logger = (options.logger ?? pino({ level: 'silent' })).child({ workerId, incarnation });
  const sink =
    options.sink instanceof SinkClient
      ? options.sink
      : new SinkClient({ url: options.sink.url, timeoutMs: options.sink.timeoutMs ?? 5_000 });
  const ownsSink = !(options.sink instanceof SinkClient);
  const nowMs = () => performance.now();
  const listeners: ((e: WorkerEvent) => void)[] = [];
  const stats = { granted: 0, completed: 0, refused: 0, released: 0, lost: 0 };
  const running = new Map<string, Running>(); // `${resource}@${token}`
  const started = new Set<string>(); // every grant ever run: a grant is never run twice
  let stopping = false;
  let requestSeq = 0;

  const emit = (event: WorkerEvent) => {
    for (const l of listeners) {
      try {
        l(event);
      } catch (err) {
        logger.error({ err }, 'worker event listener threw');
      }
    }
  };
  const abortAll = (reason: string) => {
    for (const r of running.values()) r.controller.abort(new LeaseLostError(reason));
  };

  const acquireWaitMs = Math.min(MAX_ACQUIRE_WAIT_MS, Math.max(0, options.acquireWaitMs ?? 1_000));
  const requestTimeoutMs = options.requestTimeoutMs ?? 5_000;
  const session = new WorkerSession(
    {
      coordinators: options.coordinators,
      key: options.credentials.workerKey,
      workerId,
      incarnation,
      capacity: concurrency,
      logger,
      requestTimeoutMs,
      connectTimeoutMs: 3_000,
      backoff: { initialMs: 100, maxMs: 2_000 },
      nowMs,
      random: Math.random,
    },
    {
      onSessionStarted: () => undefined,
      onSessionLost: (reason) => {
        abortAll(reason);
      },
      onLeaseRevoked: (resource, token, reason) =>
        running.get(`${resource}@${token}`)?.controller.abort(new LeaseLostError(`revoked: ${reason}`)),
      onDeadlinePassed: () => {
        abortAll('local deadline passed');
      },
    },
  );

  const request = (message: WorkerRequest) => session.request(message);

  async function acquireOnce(): Promise<Grant | undefined> {
    const requestId = `${workerId}:${incarnation}:${++requestSeq}`;
    // Retry the same request id until a definite answer: the coordinator returns the same grant.
    for (let attempt = 0; !stopping; attempt++) {
      try {
        const sentAtMs = nowMs();
        const reply = await session.request(
          { type: 'lease.acquire', requestId, ...(acquireWaitMs > 0 ? { waitMs: acquireWaitMs } : {}) },
          requestTimeoutMs + acquireWaitMs,
        );
        if (reply.type === 'lease.granted') return reply;
        if (reply.type === 'lease.none') {
          // The coordinator already waited (a long poll): ask again at once. One that answered at
          // once (it predates waitMs, or waiting is off) gets the idle back-off.
          if (acquireWaitMs > 0 && nowMs() - sentAtMs >= acquireWaitMs / 2) return undefined;
          await sleep(
            Math.min(reply.retryAfterMs || (options.idleBackoffMs ?? 500), options.idleBackoffMs ?? 500) *
              (0.5 + Math.random() / 2),
          );
          return undefined;
        }
        if (reply.type === 'error' && !reply.retryable) {
          logger.warn({ code: reply.code, requestId }, 'acquire refused');
          await sleep(options.idleBackoffMs ?? 500);
          return undefined;
        }
      } catch (err) {
        if (!(err instanceof LeaseholdError) || !err.retryable) throw err;
        logger.debug({ err, requestId }, 'acquire retry');
      }
      await sleep(backoffDelayMs(attempt, { initialMs: 50, maxMs: 1_000 }, Math.random));
    }
    return undefined;
  }

  async function runGrant(grant: Grant): Promise<void> {
    const token = BigInt(grant.token);
    const key = `${grant.resource}@${grant.token}`;
    if (started.has(key)) {
      logger.error({ resource: grant.resource, token: grant.token }, 'grant delivered twice; not running it again');
      return;
    }
    started.add(key);
    stats.granted += 1;
    const controller = new AbortController();
    running.set(key, { grant, token, controller });
    const log = logger.child({ taskId: grant.taskId, resource: grant.resource, token: grant.token });
    const base = { taskId: grant.taskId, resource: grant.resource, token };
    log.info({ attempt: grant.attempt }, 'lease granted');
    emit({ type: 'granted', ...base });
    let written: WriteOutcome | undefined;
    let lastResultId = defaultResultId(grant.taskId);

    const write = async (payload: JsonValue, opts?: WriteOptions): Promise<WriteOutcome> => {
      const resultId = opts?.resultId ?? defaultResultId(grant.taskId);
      lastResultId = resultId;
      if (controller.signal.aborted)
        throw controller.signal.reason instanceof Error ? controller.signal.reason : new LeaseLostError('aborted');
      if (!session.deadline.isValidAt(nowMs())) {
        controller.abort(new LeaseLostError('local deadline passed'));
        throw new LeaseLostError('local deadline passed before the write');
      }
      await options.beforeWrite?.({ taskId: grant.taskId, resource: grant.resource, token, resultId });
      const result = await sink.write({
        resource: grant.resource,
        token,
        resultId,
        workerId,
        incarnation,
        capability: grant.capability,
        payload,
      });
      if (!result.ok) {
        stats.refused += 1;
        log.warn({ code: result.code, fence: result.fence.toString() }, 'write refused by the sink');
        emit({ type: 'refused', ...base, code: result.code });
        if (result.code !== 'RESULT_CONFLICT') controller.abort(new WriteRefusedError(result.code, result.fence));
        throw new WriteRefusedError(result.code, result.fence);
      }
      written = { outcome: result.outcome, resultId, fence: result.fence };
      log.info({ resultId, outcome: result.outcome }, 'result written');
      emit({ type: 'written', ...base, outcome: result.outcome });
      return written;
    };

    const ctx: TaskContext = {
      resource: grant.resource,
      token,
      signal: controller.signal,
      write,
      remainingMs: () => session.deadline.remainingMs(nowMs()),
      logger: log,
    };
    const task: Task = {
      taskId: grant.taskId,
      resource: grant.resource,
      payload: grant.payload,
      attempt: grant.attempt,
    };
    const held = { resource: grant.resource, token: grant.token, incarnation };
    try {
      const value = await options.handler(task, ctx);
      if (written === undefined) {
        if (value === undefined)
          throw new LeaseholdError('INVALID_MESSAGE', 'handler returned no result and wrote none');
        await write(value);
      }
      await finish('complete', written ?? { resultId: defaultResultId(grant.taskId) });
    } catch (err) {
      if (err instanceof WriteRefusedError && err.code === 'RESULT_CONFLICT') {
        // The task's result is already stored (an earlier holder's): the task is done.
        await finish('complete', { resultId: lastResultId });
      } else if (
        stopping &&
        controller.signal.reason instanceof LeaseLostError &&
        controller.signal.reason.reason === SHUTDOWN
      ) {
        await finish('release', { resultId: '' }, SHUTDOWN);
      } else if (err instanceof LeaseLostError || err instanceof WriteRefusedError || controller.signal.aborted) {
        stats.lost += 1;
        const reason = err instanceof Error ? err.message : String(err);
        log.warn({ reason }, 'lease lost; task left to the next holder');
        emit({ type: 'lease-lost', ...base, reason });
      } else {
        const reason = err instanceof Error ? err.message : String(err);
        log.warn({ err }, 'handler failed; releasing the lease');
        await finish('release', { resultId: '' }, reason);
      }
    } finally {
      running.delete(key);
    }

    async function finish(kind: 'complete' | 'release', result: { resultId: string }, reason?: string): Promise<void> {
      for (let attempt = 0; attempt < 5; attempt++) {
        try {
          const reply =
            kind === 'complete'
              ? await request({ type: 'task.complete', taskId: grant.taskId, resultId: result.resultId, ...held })
              : await request({ type: 'lease.release', ...held, reason: (reason ?? '').slice(0, 500) });
          if (reply.type === 'task.completed') {
            stats.completed += 1;
            log.info({ resultId: result.resultId }, 'task completed');
            emit({ type: 'completed', ...base });
          } else if (reply.type === 'lease.released') {
            stats.released += 1;
            log.info({ reason }, 'lease released');
            emit({ type: 'released', ...base, reason: reason ?? '' });
          } else if (reply.type === 'error') {
            log.warn({ code: reply.code }, `${kind} refused`);
            if (reply.retryable) throw new LeaseholdError(reply.code, reply.message);
          }
          return;
        } catch (err) {
          if (!(err instanceof LeaseholdError) || !err.retryable) return;
          await sleep(backoffDelayMs(attempt, { initialMs: 50, maxMs: 1_000 }, Math.random));
        }
      }
    }
  }

  async function slot(index: number): Promise<void> {
    while (!stopping) {
      try {
        const grant = await acquireOnce();
        if (grant !== undefined) await runGrant(grant);
      } catch (err) {
        logger.error({ err, slot: index }, 'worker slot failed; continuing');
        await sleep(500);
      }
    }
  }

  session.start();
  const slots = Array.from({ length: concurrency }, (_, i) => slot(i));

  return {
    workerId,
    incarnation,
    stats,
    on(listener) {
      listeners.push(listener);
    },
    async stop(graceMs = 10_000) {
      if (stopping) return;
      stopping = true;
      const all = Promise.allSettled(slots);
      const timer = setTimeout(() => {
        abortAll(SHUTDOWN);
      }, graceMs);
      // A handler that ignores its AbortSignal cannot hold shutdown hostage for ever.
      await Promise.race([all, sleep(graceMs + 5_000)]);
      clearTimeout(timer);
      session.stop();
      if (ownsSink) void sink.close();
    },
  };
}

const SHUTDOWN = 'worker shutting down';

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
