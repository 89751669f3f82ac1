/**
 * The submitter / admin client of a leasehold cluster: typed calls to the coordinator's admin API
 * (replies validated against the protocol's schemas), over HTTP or HTTPS.
 *
 * Refusals come back as {@link LeaseholdError}s with the server's stable code (`CONFLICT`,
 * `NOT_FOUND`, `UNAUTHENTICATED`, ...); transport failures as `UNAVAILABLE` (retryable).
 */
import {
  ErrorMessageSchema,
  LeaseholdError,
  ResourceOwnerViewSchema,
  SubmitTaskBatchResponseSchema,
  TaskPageSchema,
  TaskViewSchema,
  type ResourceOwnerView,
  type SubmitTaskBatchResponse,
  type SubmitTaskRequest,
  type TaskPage,
  type TaskStateName,
  type TaskView,
} from '@leasehold/protocol';
import { JsonHttp, type JsonReply, type TlsClientOptions } from '@leasehold/sink-client';
import type { z } from 'zod';

export interface LeaseholdClientOptions {
  /** A coordinator's base URL, e.g. `https://coord-a:7500`. */
  readonly url: string;
  /** An admin bearer key. */
  readonly adminKey: string;
  /** Per-request deadline. Default 10000 ms. */
  readonly timeoutMs?: number;
  /** For an `https://` coordinator: the CA to pin, and a client certificate. */
  readonly tls?: TlsClientOptions;
}

export interface SubmitOutcome {
  /** False when the same task was submitted before (the call was idempotent). */
  readonly created: boolean;
  readonly task: TaskView;
}

export interface ListOptions {
  readonly state?: TaskStateName;
  readonly limit?: number;
  readonly after?: string;
}

const path = (...parts: string[]) => parts.map(encodeURIComponent).join('/');

export class LeaseholdClient {
  readonly #http: JsonHttp;
  readonly #key: string;

  constructor(options: LeaseholdClientOptions) {
    this.#http = new JsonHttp({
      url: options.url,
      timeoutMs: options.timeoutMs ?? 10_000,
      connections: 8,
      peer: 'coordinator',
      ...(options.tls === undefined ? {} : { tls: options.tls }),
    });
    this.#key = options.adminKey;
  }

  /** Submit a task (idempotent by task id; another definition under the same id: CONFLICT). */
  async submit(task: SubmitTaskRequest): Promise<SubmitOutcome> {
    const reply = await this.request('POST', '/v1/tasks', task);
    return { created: reply.status === 201, task: this.#expect(reply, TaskViewSchema) };
  }

  /** Submit up to 1000 tasks in one call; one result per task, in order. */
  async submitMany(tasks: readonly SubmitTaskRequest[]): Promise<SubmitTaskBatchResponse['results']> {
    const reply = await this.request('POST', '/v1/tasks/batch', { tasks });
    return this.#expect(reply, SubmitTaskBatchResponseSchema).results;
  }

  async get(taskId: string): Promise<TaskView | undefined> {
    const reply = await this.request('GET', `/v1/tasks/${path(taskId)}`);
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

  /** Cancel a task; a held task's lease is revoked. */
  async cancel(taskId: string): Promise<TaskView> {
    return this.#expect(await this.request('DELETE', `/v1/tasks/${path(taskId)}`), TaskViewSchema);
  }

  /** Who holds `resource` now (owner null when free). */
  async resource(resource: string): Promise<ResourceOwnerView> {
    return this.#expect(await this.request('GET', `/v1/resources/${path(resource)}`), ResourceOwnerViewSchema);
  }

  /** A raw authenticated call (status and parsed body), for what the typed calls do not cover. */
  request(method: 'GET' | 'POST' | 'DELETE' | 'PUT', target: string, body?: unknown): Promise<JsonReply> {
    return this.#http.request({ method, path: target, bearer: this.#key, ...(body === undefined ? {} : { body }) });
  }

  close(): Promise<void> {
    return this.#http.close();
  }

  #expect<S extends z.ZodType>(reply: JsonReply, schema: S): z.infer<S> {
    if (reply.status >= 200 && reply.status < 300) {
      const parsed = schema.safeParse(reply.body);
      if (parsed.success) return parsed.data;
      throw new LeaseholdError('UNAVAILABLE', `malformed reply from the coordinator: ${parsed.error.message}`, {
        retryable: false,
      });
    }
    const error = ErrorMessageSchema.safeParse(reply.body);
    if (error.success) {
      throw new LeaseholdError(error.data.code, `coordinator: ${error.data.message}`, {
        retryable: error.data.retryable,
      });
    }
    throw new LeaseholdError('UNAVAILABLE', `coordinator replied ${reply.status}`, { retryable: reply.status >= 500 });
  }
}
