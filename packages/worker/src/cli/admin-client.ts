/** A small client of the coordinator's admin HTTP API, used by the `leasehold` CLI. */
import { LeaseholdError } from '@leasehold/protocol';

export interface TaskView {
  readonly taskId: string;
  readonly resource: string;
  readonly state: string;
  readonly attempts: number;
  readonly payload?: unknown;
  readonly result?: { readonly resultId: string; readonly token: string };
  readonly owner?: { readonly workerId: string; readonly token: string; readonly sessionId?: string };
}

export interface ResourceOwnerView {
  readonly resource: string;
  readonly owner: {
    readonly taskId: string;
    readonly workerId: string;
    readonly incarnation?: string;
    readonly sessionId?: string;
    readonly coordinatorId?: string | null;
  } | null;
  readonly token: string | null;
  /** Milliseconds left on the holder's session, when the answering coordinator serves it. */
  readonly remainingMs: number | null;
}

export class AdminClient {
  readonly #base: string;
  readonly #key: string;

  constructor(base: string, key: string) {
    this.#base = base.replace(/\/+$/, '');
    this.#key = key;
  }

  async submit(task: { taskId: string; resource: string; payload: unknown }): Promise<TaskView> {
    return (await this.#call('POST', '/v1/tasks', task)) as TaskView;
  }

  async task(taskId: string): Promise<TaskView | undefined> {
    return (await this.#call('GET', `/v1/tasks/${encodeURIComponent(taskId)}`, undefined, true)) as
      TaskView | undefined;
  }

  /** Every task, following the list's pagination. */
  async tasks(state?: string): Promise<TaskView[]> {
    const out: TaskView[] = [];
    let after: string | undefined;
    for (;;) {
      const query = new URLSearchParams({ limit: '500' });
      if (state !== undefined) query.set('state', state);
      if (after !== undefined) query.set('after', after);
      const page = (await this.#call('GET', `/v1/tasks?${query.toString()}`)) as {
        tasks: TaskView[];
        next?: string | null;
      };
      out.push(...page.tasks);
      if (page.next === undefined || page.next === null || page.tasks.length === 0) return out;
      after = page.next;
    }
  }

  async resource(resource: string): Promise<ResourceOwnerView | undefined> {
    return (await this.#call('GET', `/v1/resources/${encodeURIComponent(resource)}`, undefined, true)) as
      ResourceOwnerView | undefined;
  }

  async #call(method: string, path: string, body?: unknown, allow404 = false): Promise<unknown> {
    let res: Response;
    try {
      res = await fetch(`${this.#base}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${this.#key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(10_000),
      });
    } catch (err) {
      throw new LeaseholdError('UNAVAILABLE', `coordinator ${this.#base} unreachable`, { cause: err });
    }
    if (allow404 && res.status === 404) return undefined;
    const json = (await res.json().catch(() => ({}))) as { code?: string; message?: string };
    if (!res.ok) {
      throw new LeaseholdError(
        res.status === 401 ? 'UNAUTHENTICATED' : res.status >= 500 ? 'UNAVAILABLE' : 'INVALID_MESSAGE',
        `${method} ${path}: HTTP ${res.status} ${json.code ?? ''} ${json.message ?? ''}`.trim(),
      );
    }
    return json;
  }
}
