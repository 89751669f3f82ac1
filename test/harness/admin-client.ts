/**
 * The one admin client of the test tree: the coordinator's admin API answering with status and
 * body, so tests can assert refusals as well as successes. Every hand-written admin call of the
 * harness goes through {@link AdminClient.call}: the in-process stacks (`Stack.admin`), the
 * process clusters (`Cluster.admin`, HTTPS with the cluster's CA) and the chaos cluster (the first
 * coordinator that answers, {@link firstAnswering}).
 *
 * Typed calls go through {@link AdminClient.client}: `@leasehold/client`'s `LeaseholdClient` (the
 * admin client the CLI and the bench use), on the same URL, key and CA. `call` is raw HTTP on
 * purpose: it sends what a test asks for (no key, a wrong key, a body that is not JSON) with a
 * per-call deadline, which the typed client does not let a caller do.
 */
import type { ResourceView, TaskView } from '@leasehold/coordinator';
import { LeaseholdClient, type SinkReadOptions } from '@leasehold/client';
import { Agent, fetch as undiciFetch } from 'undici';

export interface AdminClientOptions {
  /** The coordinator's base URL. */
  readonly url: string;
  /** The admin bearer key; undefined: no `authorization` header (to assert 401). */
  readonly key: string | undefined;
  /** For an `https://` coordinator: the CA (PEM) to trust. */
  readonly ca?: Buffer;
  /** Per-call deadline (default 10 s); a call may give its own. */
  readonly timeoutMs?: number;
  /** The sink, for the typed client's result reads (`waitForResult`, `sinkEvents`). */
  readonly sink?: SinkReadOptions;
}

export interface AdminReply {
  readonly status: number;
  // Test convenience: response bodies are read field by field in assertions.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly body: any;
}

export interface CallOptions {
  /** Sent as the body as is (with `content-type: application/json`), instead of `body` as JSON. */
  readonly raw?: string;
  readonly timeoutMs?: number;
}

/** A submit as `/v1/tasks` takes it (the typed client's `submit` has every option). */
export interface SubmitBody {
  readonly taskId: string;
  readonly resource: string;
  /** Absent: the `default` queue. */
  readonly queue?: string;
  readonly payload: unknown;
}

export class AdminClient {
  readonly url: string;
  readonly #o: AdminClientOptions;
  readonly #agent: Agent | undefined;
  #client: LeaseholdClient | undefined;

  constructor(url: string, key: string | undefined, options: Omit<AdminClientOptions, 'url' | 'key'> = {}) {
    this.url = url;
    this.#o = { url, key, ...options };
    this.#agent = options.ca === undefined ? undefined : new Agent({ connect: { ca: options.ca } });
  }

  /** `method path` with `body` as JSON (or `options.raw`); the status and the parsed body (undefined when empty). */
  async call(method: string, path: string, body?: unknown, options: CallOptions = {}): Promise<AdminReply> {
    const key = this.#o.key;
    const sent = options.raw ?? (body === undefined ? undefined : JSON.stringify(body));
    const res = await undiciFetch(`${this.url}${path}`, {
      method,
      headers: {
        ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
        ...(sent === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(sent === undefined ? {} : { body: sent }),
      ...(this.#agent === undefined ? {} : { dispatcher: this.#agent }),
      signal: AbortSignal.timeout(options.timeoutMs ?? this.#o.timeoutMs ?? 10_000),
    });
    const text = await res.text();
    return { status: res.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
  }

  /** The typed client on the same coordinator, key and CA (made on first use). */
  get client(): LeaseholdClient {
    this.#client ??= new LeaseholdClient({
      url: this.url,
      adminKey: this.#o.key ?? '',
      ...(this.#o.ca === undefined ? {} : { tls: { ca: this.#o.ca } }),
      ...(this.#o.sink === undefined ? {} : { sink: this.#o.sink }),
    });
    return this.#client;
  }

  /** Submit `{taskId, resource, payload}`, or the same as three arguments. */
  submit(task: SubmitBody): Promise<AdminReply>;
  submit(taskId: string, resource: string, payload?: unknown): Promise<AdminReply>;
  submit(task: SubmitBody | string, resource?: string, payload: unknown = { n: 1 }): Promise<AdminReply> {
    const body = typeof task === 'string' ? { taskId: task, resource, payload } : task;
    return this.call('POST', '/v1/tasks', body);
  }

  task(taskId: string): Promise<AdminReply> {
    return this.call('GET', `/v1/tasks/${encodeURIComponent(taskId)}`);
  }

  cancel(taskId: string): Promise<AdminReply> {
    return this.call('DELETE', `/v1/tasks/${encodeURIComponent(taskId)}`);
  }

  resource(resource: string): Promise<AdminReply> {
    return this.call('GET', `/v1/resources/${encodeURIComponent(resource)}`);
  }

  /** `GET /v1/tasks<query>`, e.g. `?state=leased&limit=100`. */
  async list(query = ''): Promise<{ status: number; body: { tasks: TaskView[]; next: string | null } }> {
    return this.call('GET', `/v1/tasks${query}`);
  }

  /** The same as {@link list} (the process clusters' name for it). */
  tasks(query = ''): Promise<AdminReply> {
    return this.call('GET', `/v1/tasks${query}`);
  }

  async resourceView(resource: string): Promise<ResourceView> {
    return this.client.resource(resource);
  }

  async close(): Promise<void> {
    await Promise.all([this.#client?.close(), this.#agent?.close()]);
  }
}

/**
 * The call on the first client whose coordinator answers below 500 (a 5xx or a transport error:
 * the next one is asked); rejects with the last failure when none does.
 */
export async function firstAnswering(
  clients: readonly AdminClient[],
  method: string,
  path: string,
  body: unknown,
  timeoutMs: number,
): Promise<AdminReply> {
  let last: unknown;
  for (const admin of clients) {
    try {
      const reply = await admin.call(method, path, body, { timeoutMs });
      if (reply.status < 500) return reply;
      last = new Error(`${admin.url}: ${reply.status} ${JSON.stringify(reply.body)}`);
    } catch (err) {
      last = err;
    }
  }
  throw last instanceof Error ? last : new Error('no coordinator answered');
}
