/**
 * `waitForResult(taskId)`: subscribe to the task's events FIRST, then read the task, then follow
 * the events until it ends — so an end that happens between the read and the subscription cannot
 * be missed. This rests on the coordinator fixing the stream's start revision (its index revision)
 * before it answers the subscribe, and on the task read being a linearizable etcd read (at a
 * revision at least as new): every change after the read is on the stream. A `reset` (the stream
 * could not resume after a reconnect) is followed by a fresh read of the task.
 *
 * The answer: `completed` with the result reference, and the stored result itself when the client
 * has a sink (read from `GET /v1/resources/:r/results/:id`); `failed` with the last error and the
 * attempt history; `cancelled`. A deadline gives a {@link WaitTimeoutError}; the caller's signal,
 * its abort reason.
 */
import {
  LeaseholdError,
  type AttemptView,
  type CoordinatorEvent,
  type StoredResult,
  type TaskError,
  type TaskStateName,
  type TaskView,
} from '@leasehold/protocol';
import { WaitTimeoutError } from './errors.js';
import type { LeaseholdClient } from './client.js';

export interface WaitOptions {
  readonly signal?: AbortSignal;
  /** Give up after this long (WaitTimeoutError). Default: no deadline. */
  readonly timeoutMs?: number;
  /**
   * Each state the task is seen in while not ended: from the read (the events are followed from
   * then on) and from each event. For progress output.
   */
  readonly onState?: (state: TaskStateName) => void;
}

export type TaskResult =
  | {
      readonly state: 'completed';
      readonly resultId: string;
      readonly token: string;
      /** The stored result, when the client was given the sink. */
      readonly result?: StoredResult;
      readonly task: TaskView;
    }
  | {
      readonly state: 'failed';
      readonly error: TaskError | undefined;
      readonly history: readonly AttemptView[];
      readonly task: TaskView;
    }
  | { readonly state: 'cancelled'; readonly task: TaskView };

const TERMINAL = new Set<TaskStateName>(['completed', 'failed', 'cancelled']);

export async function waitForResult(
  client: LeaseholdClient,
  taskId: string,
  options: WaitOptions = {},
): Promise<TaskResult> {
  options.signal?.throwIfAborted();
  const controller = new AbortController();
  const onAbort = () => {
    controller.abort(options.signal?.reason);
  };
  options.signal?.addEventListener('abort', onAbort, { once: true });
  let timedOut = false;
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, options.timeoutMs);
  let lastState: TaskStateName | undefined;
  let connect: () => void = () => undefined;
  const connected = new Promise<void>((resolve) => (connect = resolve));
  const events = client.events({
    taskId,
    signal: controller.signal,
    onConnected: () => {
      connect();
    },
  });
  const iterator = events[Symbol.asyncIterator]();
  const pull = (): Promise<IteratorResult<CoordinatorEvent>> => {
    const p = iterator.next();
    p.catch(() => undefined); // read below; never an unhandled rejection while we wait elsewhere
    return p;
  };
  const stopped = () => {
    if (timedOut) return new WaitTimeoutError(taskId, options.timeoutMs ?? 0, lastState);
    const reason: unknown = options.signal?.reason;
    return reason instanceof Error ? reason : new LeaseholdError('UNAVAILABLE', `waiting for ${taskId} was aborted`);
  };
  try {
    let next = pull();
    const first = await Promise.race([connected.then(() => undefined), next]);
    if (first?.done === true) throw stopped();
    for (;;) {
      // (Re)read after the stream is in place: anything later arrives as an event.
      const view = await client.get(taskId);
      if (controller.signal.aborted) throw stopped();
      if (view === undefined) throw new LeaseholdError('NOT_FOUND', `no task ${taskId}`);
      lastState = view.state;
      if (TERMINAL.has(view.state)) return await finish(client, view);
      options.onState?.(view.state);
      let reread = false;
      while (!reread) {
        const r = await next;
        if (r.done) throw stopped();
        next = pull();
        const event = r.value;
        if (event.type === 'reset') reread = true;
        else if (event.taskId === taskId) {
          lastState = event.state;
          reread = TERMINAL.has(event.state);
          if (!reread) options.onState?.(event.state);
        }
      }
    }
  } catch (err) {
    if (controller.signal.aborted && !(err instanceof WaitTimeoutError)) throw stopped();
    throw err;
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    controller.abort();
    await iterator.return?.(undefined).catch(() => undefined);
  }
}

async function finish(client: LeaseholdClient, task: TaskView): Promise<TaskResult> {
  switch (task.state) {
    case 'completed': {
      const ref = task.result;
      if (ref === undefined) throw new LeaseholdError('UNAVAILABLE', `task ${task.taskId} completed without a result`);
      if (!client.hasSink) return { state: 'completed', resultId: ref.resultId, token: ref.token, task };
      const result = await client.storedResult(task.resource, ref.resultId);
      if (result === undefined) {
        throw new LeaseholdError(
          'NOT_FOUND',
          `task ${task.taskId} completed, but the sink has no result ${ref.resultId}`,
        );
      }
      return { state: 'completed', resultId: ref.resultId, token: ref.token, result, task };
    }
    case 'failed':
      return { state: 'failed', error: task.lastError, history: task.history ?? [], task };
    default:
      return { state: 'cancelled', task };
  }
}
