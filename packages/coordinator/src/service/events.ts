/**
 * The push channel of task changes (`GET /v1/events`): each subscriber gets its own store watch from
 * the revision it asks for (the `Last-Event-ID` it saw last, + 1), so a reconnecting client misses
 * nothing and sees nothing twice. Every task write says what it was (`lastEvent`), so an event is
 * read off the record alone. When the watch cannot resume (the revision was compacted, the watch
 * failed) the subscriber gets a `reset` event and the stream continues from the present.
 */
import { formatToken, type CoordinatorEvent, type RetryPolicy, type TaskEvent } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { lastEventOf, policyOf, viewState } from '../core/lifecycle.js';
import type { TaskIndex } from '../core/task-index.js';
import { queueOf } from '../core/task-record.js';
import type { Timers } from '../core/timers.js';
import type { LeaseStore, StoredTask } from '../store/port.js';

/** What the task event streams use. */
export interface EventsContext {
  readonly config: Pick<CoordinatorConfig, 'retryPolicy'>;
  readonly wallClock: () => number;
  readonly timers: Timers;
  readonly log: Logger;
  readonly store: Pick<LeaseStore, 'watch'>;
  readonly index: Pick<TaskIndex, 'revision'>;
}

export interface EventSink {
  /** One event; `id` is its revision (absent on `reset`). */
  send(event: CoordinatorEvent, id: string | undefined): void;
  /** The stream is over (shutdown). */
  end(): void;
}

export interface Subscription {
  close(): void;
}

/** The event a task write describes (undefined for a delete: purges are not announced). */
export function taskEventOf(
  stored: StoredTask,
  ctx: { readonly config: { readonly retryPolicy: RetryPolicy } },
  nowMs: number,
): TaskEvent {
  const task = stored.record;
  const event = lastEventOf(task);
  const last = task.last;
  const closing = event !== 'granted' && event !== 'submitted' && event !== 'retried';
  const token =
    event === 'granted'
      ? formatToken(stored.modRevision)
      : event === 'completed'
        ? task.result?.token
        : closing
          ? last?.token
          : undefined;
  const workerId = event === 'granted' ? task.open?.workerId : closing ? last?.workerId : undefined;
  const error = event === 'retrying' || event === 'expired' || event === 'failed' ? task.lastError : undefined;
  return {
    type: 'task',
    revision: formatToken(stored.modRevision),
    event,
    taskId: task.taskId,
    resource: task.resource,
    queue: queueOf(task),
    state: viewState(task, event === 'granted', nowMs),
    attempts: task.attempts,
    maxAttempts: policyOf(task, ctx.config.retryPolicy).maxAttempts,
    ...(token === undefined ? {} : { token }),
    ...(workerId === undefined ? {} : { workerId }),
    ...(error === undefined ? {} : { error }),
    ...(task.notBeforeMs === undefined ? {} : { notBeforeMs: task.notBeforeMs }),
    ...(task.result === undefined ? {} : { result: task.result }),
    atMs: task.atMs ?? 0,
  };
}

export class TaskEventService {
  readonly #ctx: EventsContext;
  readonly #subs = new Set<{ sink: EventSink; stop: () => void }>();
  #closed = false;

  constructor(ctx: EventsContext) {
    this.#ctx = ctx;
  }

  /**
   * Task events after `afterRevision` (default: from now), only of `taskId` when given. Resolves
   * once the watch is in place.
   */
  async subscribe(options: {
    readonly afterRevision?: bigint | undefined;
    readonly taskId?: string | undefined;
    readonly sink: EventSink;
  }): Promise<Subscription> {
    const { store, log } = this.#ctx;
    const { sink, taskId } = options;
    let watcher: { cancel(): Promise<void> } | undefined;
    let stopped = false;
    let restarts = 0;
    const entry = {
      sink,
      stop: () => {
        stopped = true;
        void watcher?.cancel().catch(() => undefined);
      },
    };
    const start = async (from: bigint): Promise<void> => {
      watcher = await store.watch(from, {
        onRevision: (_revision, events) => {
          if (stopped) return;
          const nowMs = this.#ctx.wallClock();
          for (const ev of events) {
            if (ev.kind !== 'task' || ev.task === undefined) continue;
            if (taskId !== undefined && ev.taskId !== taskId) continue;
            const event = taskEventOf(ev.task, this.#ctx, nowMs);
            sink.send(event, event.revision);
          }
        },
        onProgress: () => undefined,
        onError: (err) => {
          if (stopped) return;
          // Compacted (or failed): say so, then carry on from the present.
          const from = this.#ctx.index.revision + 1n;
          sink.send({ type: 'reset', revision: formatToken(from), reason: String(err) }, undefined);
          restarts += 1;
          const delayMs = Math.min(5_000, 100 * 2 ** Math.min(restarts, 6));
          this.#ctx.timers.setTimeout(() => {
            if (stopped) return;
            start(from).catch((e: unknown) => {
              log.warn({ err: e }, 'event stream could not resume');
              this.#drop(entry);
            });
          }, delayMs);
        },
      });
      if (stopped) await watcher.cancel().catch(() => undefined);
    };
    if (this.#closed) throw new Error('event service closed');
    await start(options.afterRevision === undefined ? this.#ctx.index.revision + 1n : options.afterRevision + 1n);
    this.#subs.add(entry);
    return {
      close: () => {
        this.#subs.delete(entry);
        entry.stop();
      },
    };
  }

  /** Shutdown: end every stream. */
  close(): void {
    this.#closed = true;
    for (const entry of [...this.#subs]) this.#drop(entry);
  }

  #drop(entry: { sink: EventSink; stop: () => void }): void {
    this.#subs.delete(entry);
    entry.stop();
    entry.sink.end();
  }
}
