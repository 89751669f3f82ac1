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
 *
 * Typed results: `waitForResult<R>()` types the stored payload as `R` (the worker's `Result`). With
 * a `result` schema (zod or any Standard Schema) the payload is checked, and `R` is the schema's
 * output; a payload it refuses is an {@link InvalidResultError}. Without one, `R` is taken on trust.
 *
 * It sees the client only through {@link ResultSource} (the four calls it makes), so this file
 * does not import the client and a unit test can hand it an in-memory source.
 */
import {
  checkWithSchema,
  LeaseholdError,
  type AttemptView,
  type CoordinatorEvent,
  type JsonValue,
  type StandardSchema,
  type StoredResult,
  type TaskError,
  type TaskStateName,
  type TaskView,
} from '@leasehold/protocol';
import { InvalidResultError, WaitTimeoutError } from './errors.js';

/** What waitForResult needs of a client (LeaseholdClient is one). */
export interface ResultSource {
  events(options: {
    readonly taskId: string;
    readonly signal: AbortSignal;
    readonly onConnected: (url: string) => void;
  }): AsyncIterable<CoordinatorEvent>;
  get(taskId: string): Promise<TaskView | undefined>;
  storedResult(resource: string, resultId: string): Promise<StoredResult | undefined>;
  readonly hasSink: boolean;
}

/** A stored result whose payload is the worker's `Result`. */
export type StoredResultOf<R> = Omit<StoredResult, 'payload'> & { readonly payload: R };

export interface WaitOptions<R = JsonValue> {
  readonly signal?: AbortSignal;
  /** Give up after this long (WaitTimeoutError). Default: no deadline. */
  readonly timeoutMs?: number;
  /**
   * Each state the task is seen in while not ended: from the read (the events are followed from
   * then on) and from each event. For progress output.
   */
  readonly onState?: (state: TaskStateName) => void;
  /**
   * Check the stored result's payload (zod or any Standard Schema; needs the client's `sink`): the
   * answer carries the schema's output; a payload it refuses rejects with InvalidResultError.
   */
  readonly result?: StandardSchema<R>;
}

export type TaskResult<R = JsonValue> =
  | {
      readonly state: 'completed';
      readonly resultId: string;
      readonly token: string;
      /** The stored result, when the client was given the sink and the handler wrote one (`task.result.noResult`: it wrote none). */
      readonly result?: StoredResultOf<R>;
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

export async function waitForResult<R = JsonValue>(
  client: ResultSource,
  taskId: string,
  options: WaitOptions<R> = {},
): Promise<TaskResult<R>> {
  options.signal?.throwIfAborted();
  if (options.result !== undefined && !client.hasSink) {
    throw new LeaseholdError('INVALID_MESSAGE', 'checking the result (the result option) needs the sink option', {
      retryable: false,
    });
  }
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
      if (TERMINAL.has(view.state)) return await finish(client, view, options.result);
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

async function finish<R>(
  client: ResultSource,
  task: TaskView,
  schema: StandardSchema<R> | undefined,
): Promise<TaskResult<R>> {
  switch (task.state) {
    case 'completed': {
      const ref = task.result;
      if (ref === undefined) throw new LeaseholdError('UNAVAILABLE', `task ${task.taskId} completed without a result`);
      // No sink, or a task whose handler wrote nothing to it (side effect only, or its own fenced
      // transaction): the reference is the answer, there is no stored result to read.
      if (!client.hasSink || ref.noResult === true) {
        return { state: 'completed', resultId: ref.resultId, token: ref.token, task };
      }
      const result = await client.storedResult(task.resource, ref.resultId);
      if (result === undefined) {
        throw new LeaseholdError(
          'NOT_FOUND',
          `task ${task.taskId} completed, but the sink has no result ${ref.resultId}`,
        );
      }
      if (schema === undefined) {
        // No schema: R is the caller's word for the payload's type (the worker's Result).
        return {
          state: 'completed',
          resultId: ref.resultId,
          token: ref.token,
          result: result as StoredResultOf<R>,
          task,
        };
      }
      const check = await checkWithSchema(
        schema,
        result.payload,
        `the result of task ${task.taskId} refused by the schema`,
        '(result)',
      );
      if (!check.ok) throw new InvalidResultError(task.taskId, check.message, check.issues, result);
      return {
        state: 'completed',
        resultId: ref.resultId,
        token: ref.token,
        result: { ...result, payload: check.value },
        task,
      };
    }
    case 'failed':
      return { state: 'failed', error: task.lastError, history: task.history ?? [], task };
    default:
      return { state: 'cancelled', task };
  }
}
