/**
 * The submitter / admin client of a leasehold cluster: typed calls to the coordinator's admin API
 * (replies validated against the protocol's schemas), over HTTP or HTTPS; the coordinator's task
 * event stream and the sink's decision/refusal stream, each reconnecting on its own.
 *
 * Refusals come back as {@link LeaseholdError}s with the server's stable code (`CONFLICT`,
 * `NOT_FOUND`, `UNAUTHENTICATED`, ...); transport failures as `UNAVAILABLE` (retryable).
 *
 * Several coordinator URLs: a call goes to the one that answered last; when it cannot be reached
 * at all (connection refused, no route, DNS) or says SHUTTING_DOWN, the call is made on the next
 * one — nothing was done on the first. A call that reached a coordinator and then failed (reset,
 * timeout) is not repeated for you: its outcome is unknown (submits are idempotent by task id, so
 * submitting again is safe).
 */
import {
  ErrorMessageSchema,
  LeaseholdError,
  PurgeTasksResponseSchema,
  ResourceOwnerViewSchema,
  StoredResultSchema,
  SubmitTaskBatchResponseSchema,
  TaskPageSchema,
  TaskViewSchema,
  type CoordinatorEvent,
  type JsonValue,
  type PurgeTasksRequest,
  type PurgeTasksResponse,
  type ResourceOwnerView,
  type SinkEvent,
  type StoredResult,
  type SubmitTaskBatchResponse,
  type SubmitTaskRequest,
  type TaskPage,
  type TaskStateName,
  type TaskView,
} from '@leasehold/protocol';
import { JsonHttp, sinkResultPath, type JsonReply, type TlsClientOptions } from '@leasehold/sink-client';
import type { z } from 'zod';
import { decodeCoordinatorEvent, decodeSinkEvent } from './event-decoders.js';
import { streamEvents, type ReconnectOptions } from './event-stream.js';
import { resourceOwnerPath, taskPath, taskRetryPath } from './paths.js';
import { waitForResult, type TaskResult, type WaitOptions } from './wait-for-result.js';

export interface SinkReadOptions {
  /** The sink's base URL (several: failover for the event stream). */
  readonly url: string | readonly string[];
  /** A read key (or a coordinator key) of the sink. */
  readonly key: string;
  readonly tls?: TlsClientOptions;
}

export interface EventStreamSettings {
  readonly reconnect?: ReconnectOptions;
  /** Reconnect when nothing (not even a keepalive) arrived for this long. Default 45000 ms. */
  readonly idleTimeoutMs?: number;
  /** [0, 1) for the reconnect jitter. Default Math.random. */
  readonly random?: () => number;
  /** Largest event a stream may send, in bytes; a bigger one ends it with SseEventTooLargeError. Default 1 MiB. */
  readonly maxEventBytes?: number;
}

export interface LeaseholdClientOptions {
  /** A coordinator's base URL, e.g. `https://coord-a:7500`, or several (failover). */
  readonly url: string | readonly string[];
  /** An admin bearer key. */
  readonly adminKey: string;
  /** Per-request deadline. Default 10000 ms. */
  readonly timeoutMs?: number;
  /** For an `https://` coordinator: the CA to pin, and a client certificate. */
  readonly tls?: TlsClientOptions;
  /** The sink, to read results (`waitForResult`) and follow its events (`sinkEvents`). */
  readonly sink?: SinkReadOptions;
  readonly events?: EventStreamSettings;
}

export interface SubmitOutcome {
  /** False when the same task was submitted before (the call was idempotent). */
  readonly created: boolean;
  readonly task: TaskView;
}

/**
 * A submit: the wire request, with `runAt` also as a Date, and the payload typed `P` (the worker's
 * `Payload`, e.g. `submit<Invoice>(...)`); it is sent as its JSON, which the coordinator checks.
 */
export type SubmitOptions<P = JsonValue> = Omit<SubmitTaskRequest, 'runAt' | 'payload'> & {
  readonly payload: P;
  readonly runAt?: string | Date | undefined;
};

/** How `submitMany` answers. */
export interface SubmitManyOptions {
  /** `false`: results without task views (default `true`: each created or existing task's view). */
  readonly views?: boolean;
}

export interface ListOptions {
  readonly state?: TaskStateName;
  readonly limit?: number;
  readonly after?: string;
}

export interface PurgeAllOptions extends Omit<PurgeTasksRequest, 'limit'> {
  /** Per call. Default 1000. */
  readonly limit?: number;
  readonly signal?: AbortSignal;
}

export interface TaskEventsOptions {
  /** Only this task's events. */
  readonly taskId?: string;
  /** Resume after this revision (the `revision` of the last event seen); default: from now. */
  readonly after?: string;
  readonly signal?: AbortSignal;
  /** Called each time the stream is (re)connected. */
  readonly onConnected?: (url: string) => void;
  readonly onDisconnected?: (info: { url: string; error: unknown; retryInMs: number }) => void;
}

export interface SinkEventsOptions {
  /** Resume after this decision seq; default: from now. */
  readonly after?: number;
  readonly signal?: AbortSignal;
  readonly onConnected?: (url: string) => void;
  readonly onDisconnected?: (info: { url: string; error: unknown; retryInMs: number }) => void;
}

const list = (url: string | readonly string[]): readonly string[] => (typeof url === 'string' ? [url] : url);

/** Error codes (of the cause) meaning the connection was never made: nothing reached the server. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

function neverReached(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (NOT_CONNECTED.has(code) || code === 'UND_ERR_CONNECT_TIMEOUT')) return true;
  }
  return false;
}

function wireSubmit<P>(task: SubmitOptions<P>): SubmitTaskRequest {
  const { runAt, payload, ...rest } = task;
  const wire = { ...rest, payload: payload as JsonValue }; // P is the caller's type of a JSON value
  if (runAt === undefined) return wire;
  return { ...wire, runAt: typeof runAt === 'string' ? runAt : runAt.toISOString() };
}

export class LeaseholdClient {
  readonly #coordinators: readonly JsonHttp[];
  readonly #urls: readonly string[];
  readonly #key: string;
  readonly #o: LeaseholdClientOptions;
  readonly #sink: JsonHttp | undefined;
  #preferred = 0;

  constructor(options: LeaseholdClientOptions) {
    this.#o = options;
    this.#urls = list(options.url);
    if (this.#urls.length === 0) throw new LeaseholdError('INVALID_MESSAGE', 'no coordinator URL given');
    this.#coordinators = this.#urls.map(
      (url) =>
        new JsonHttp({
          url,
          timeoutMs: options.timeoutMs ?? 10_000,
          connections: 8,
          peer: 'coordinator',
          ...(options.tls === undefined ? {} : { tls: options.tls }),
        }),
    );
    this.#key = options.adminKey;
    const sink = options.sink;
    this.#sink =
      sink === undefined
        ? undefined
        : new JsonHttp({
            url: list(sink.url)[0] ?? '',
            timeoutMs: options.timeoutMs ?? 10_000,
            connections: 4,
            peer: 'sink',
            ...(sink.tls === undefined ? {} : { tls: sink.tls }),
          });
  }

  /**
   * Submit a task (idempotent by task id; another definition under the same id: CONFLICT). The
   * payload is a JsonValue, or the `P` you name (`submit<Invoice>(...)`, the worker's `Payload`);
   * `P` is never inferred from the payload, so an unnamed call still checks it is JSON.
   */
  async submit<P = JsonValue>(task: SubmitOptions<NoInfer<P>>): Promise<SubmitOutcome> {
    const reply = await this.request('POST', '/v1/tasks', wireSubmit(task));
    return { created: reply.status === 201, task: this.#expect(reply, TaskViewSchema) };
  }

  /**
   * Submit up to 1000 tasks in one call; one result per task, in order. With `views: false` the
   * results carry each task's id, status and error only, not its view (`Prefer: return=minimal`):
   * cheaper at both ends when the caller needs only the outcomes.
   */
  async submitMany<P = JsonValue>(
    tasks: readonly SubmitOptions<NoInfer<P>>[],
    options: SubmitManyOptions = {},
  ): Promise<SubmitTaskBatchResponse['results']> {
    const minimal = options.views === false;
    const reply = await this.request(
      'POST',
      '/v1/tasks/batch',
      { tasks: tasks.map(wireSubmit) },
      minimal ? { prefer: 'return=minimal' } : undefined,
    );
    return this.#expect(reply, SubmitTaskBatchResponseSchema).results;
  }

  async get(taskId: string): Promise<TaskView | undefined> {
    const reply = await this.request('GET', taskPath(taskId));
    if (reply.status === 404) return undefined;
    return this.#expect(reply, TaskViewSchema);
  }

  /** One page of tasks in id order; pass `next` as `after` for the next one. */
  async list(options: ListOptions = {}): Promise<TaskPage> {
    const query = new URLSearchParams({ limit: String(options.limit ?? 100) });
    if (options.state !== undefined) query.set('state', options.state);
    if (options.after !== undefined) query.set('after', options.after);
    return this.#expect(await this.request('GET', `/v1/tasks?${query.toString()}`), TaskPageSchema);
  }

  /** Every task (of `state`), following the pages. */
  async tasks(state?: TaskStateName): Promise<TaskView[]> {
    const out: TaskView[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.list({
        limit: 500,
        ...(state === undefined ? {} : { state }),
        ...(after === undefined ? {} : { after }),
      });
      out.push(...page.tasks);
      if (page.next === null || page.tasks.length === 0) return out;
      after = page.next;
    }
  }

  /**
   * Cancel a task. A held task's lease is revoked and the sink's fence advanced before the reply, so
   * the holder's late write is refused. CONFLICT when it is completed or failed.
   */
  async cancel(taskId: string): Promise<TaskView> {
    return this.#expect(await this.request('DELETE', taskPath(taskId)), TaskViewSchema);
  }

  /** A failed task pending again with a fresh attempt budget. CONFLICT when it is not failed. */
  async retry(taskId: string): Promise<TaskView> {
    return this.#expect(await this.request('POST', taskRetryPath(taskId)), TaskViewSchema);
  }

  /** Delete up to `limit` tasks of a terminal state that ended at least `olderThanMs` ago. */
  async purge(request: PurgeTasksRequest): Promise<PurgeTasksResponse> {
    return this.#expect(await this.request('POST', '/v1/tasks/purge', request), PurgeTasksResponseSchema);
  }

  /** {@link purge} again while it says `more`; the total purged. */
  async purgeAll(options: PurgeAllOptions): Promise<number> {
    let total = 0;
    for (;;) {
      options.signal?.throwIfAborted();
      const res = await this.purge({
        state: options.state,
        olderThanMs: options.olderThanMs,
        ...(options.limit === undefined ? {} : { limit: options.limit }),
      });
      total += res.purged;
      if (!res.more || res.purged === 0) return total;
    }
  }

  /** Who holds `resource` now (owner null when free). */
  async resource(resource: string): Promise<ResourceOwnerView> {
    return this.#expect(await this.request('GET', resourceOwnerPath(resource)), ResourceOwnerViewSchema);
  }

  /**
   * The coordinator's task events (and `reset`s) as they happen, until `signal` aborts; reconnects
   * by itself (to the next coordinator URL, resuming after the last revision seen). Ends with a
   * LeaseholdError on a refusal a reconnect cannot fix (bad key, bad request).
   */
  events(options: TaskEventsOptions = {}): AsyncIterable<CoordinatorEvent> {
    const query = options.taskId === undefined ? '' : `?taskId=${encodeURIComponent(options.taskId)}`;
    const settings = this.#o.events;
    return streamEvents({
      urls: this.#urls,
      path: `/v1/events${query}`,
      bearer: this.#key,
      tls: this.#o.tls,
      peer: 'coordinator',
      after: options.after,
      signal: options.signal,
      decode: decodeCoordinatorEvent,
      reconnect: settings?.reconnect,
      idleTimeoutMs: settings?.idleTimeoutMs,
      random: settings?.random,
      maxEventBytes: settings?.maxEventBytes,
      onConnected: options.onConnected,
      onDisconnected: options.onDisconnected,
    });
  }

  /** The sink's decision log and refusals as they happen (needs the `sink` option). */
  sinkEvents(options: SinkEventsOptions = {}): AsyncIterable<SinkEvent> {
    const sink = this.#o.sink;
    if (sink === undefined) throw new LeaseholdError('INVALID_MESSAGE', 'sinkEvents needs the sink option');
    return sinkEvents({ ...sink, ...options, ...(this.#o.events === undefined ? {} : { settings: this.#o.events }) });
  }

  /**
   * Wait until the task ends; see {@link waitForResult}. `R` types the stored result's payload (the
   * worker's `Result`): inferred from a `result` schema, which checks it, or given on trust.
   */
  waitForResult<R = JsonValue>(taskId: string, options: WaitOptions<R> = {}): Promise<TaskResult<R>> {
    return waitForResult(this, taskId, options);
  }

  /** The stored result at the sink (needs the `sink` option); undefined when there is none. */
  async storedResult(resource: string, resultId: string): Promise<StoredResult | undefined> {
    const sink = this.#sink;
    const key = this.#o.sink?.key;
    if (sink === undefined || key === undefined) {
      throw new LeaseholdError('INVALID_MESSAGE', 'reading results needs the sink option');
    }
    const reply = await sink.request({
      method: 'GET',
      path: sinkResultPath(resource, resultId),
      bearer: key,
    });
    if (reply.status === 404) return undefined;
    return this.#expect(reply, StoredResultSchema, 'sink');
  }

  /** True when a sink was configured (results can be read). */
  get hasSink(): boolean {
    return this.#sink !== undefined;
  }

  /** A raw authenticated call (status and parsed body), for what the typed calls do not cover. */
  async request(
    method: 'GET' | 'POST' | 'DELETE' | 'PUT',
    target: string,
    body?: unknown,
    headers?: Readonly<Record<string, string>>,
  ): Promise<JsonReply> {
    const req = {
      method,
      path: target,
      bearer: this.#key,
      ...(body === undefined ? {} : { body }),
      ...(headers === undefined ? {} : { headers }),
    };
    let last: unknown;
    for (let i = 0; i < this.#coordinators.length; i++) {
      const at = (this.#preferred + i) % this.#coordinators.length;
      const http = this.#coordinators[at];
      if (http === undefined) continue;
      try {
        const reply = await http.request(req);
        if (reply.status === 503 && (reply.body as { code?: unknown } | undefined)?.code === 'SHUTTING_DOWN') {
          last = reply;
          continue;
        }
        this.#preferred = at;
        return reply;
      } catch (err) {
        if (!neverReached(err)) throw err;
        last = err;
      }
    }
    if (last instanceof Error) throw last;
    return last as JsonReply;
  }

  async close(): Promise<void> {
    await Promise.all([...this.#coordinators.map((c) => c.close()), this.#sink?.close()]);
  }

  #expect<S extends z.ZodType>(reply: JsonReply, schema: S, peer = 'coordinator'): z.infer<S> {
    if (reply.status >= 200 && reply.status < 300) {
      const parsed = schema.safeParse(reply.body);
      if (parsed.success) return parsed.data;
      throw new LeaseholdError('UNAVAILABLE', `malformed reply from the ${peer}: ${parsed.error.message}`, {
        retryable: false,
      });
    }
    const error = ErrorMessageSchema.safeParse(reply.body);
    if (error.success) {
      throw new LeaseholdError(error.data.code, `${peer}: ${error.data.message}`, {
        retryable: error.data.retryable,
      });
    }
    throw new LeaseholdError('UNAVAILABLE', `${peer} replied ${reply.status}`, { retryable: reply.status >= 500 });
  }
}

export interface StandaloneSinkEventsOptions extends SinkReadOptions, SinkEventsOptions {
  readonly settings?: EventStreamSettings;
}

/** The sink's event stream with sink credentials alone (a read key is enough). */
export function sinkEvents(options: StandaloneSinkEventsOptions): AsyncIterable<SinkEvent> {
  return streamEvents({
    urls: list(options.url),
    path: '/v1/events',
    bearer: options.key,
    tls: options.tls,
    peer: 'sink',
    after: options.after === undefined ? undefined : String(options.after),
    signal: options.signal,
    decode: decodeSinkEvent,
    reconnect: options.settings?.reconnect,
    idleTimeoutMs: options.settings?.idleTimeoutMs,
    random: options.settings?.random,
    maxEventBytes: options.settings?.maxEventBytes,
    onConnected: options.onConnected,
    onDisconnected: options.onDisconnected,
  });
}
