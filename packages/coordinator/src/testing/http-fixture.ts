/**
 * The admin HTTP tests' shared setup (server.test, ids-addressable.test, console-auth.test): a
 * recording task service and the real fastify server on a loopback port. Test-only (src/testing is
 * not built nor packed).
 */
import { DEFAULT_RETRY_POLICY, type TaskStateName, type TaskView } from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import { pino, type Logger } from 'pino';
import { Metrics } from '../metrics.js';
import type { TaskApi } from '../http/routes-tasks.js';
import { createHttpServer, type HttpOptions } from '../http/server.js';

export const ADMIN_KEY = 'admin-key-0123456789abcdef';

/** A task view as the recording service answers it. */
export const taskView = (taskId: string, state: TaskStateName = 'pending'): TaskView => ({
  taskId,
  resource: 'r',
  queue: 'default',
  payload: 1,
  payloadBytes: 1,
  state,
  attempts: 0,
  priority: 0,
  retry: DEFAULT_RETRY_POLICY,
  lastEvent: state === 'pending' ? 'submitted' : 'cancelled',
  history: [],
});

/**
 * A task service that does no work: each call is pushed to `calls` as `<method> <argument>` (what
 * a test asserts: a refused request must leave it empty) and answered with a canned success.
 */
export function recordingTasks(calls: string[], state: TaskStateName = 'pending'): TaskApi {
  const record = <T>(call: string, value: T): Promise<T> => {
    calls.push(call);
    return Promise.resolve(value);
  };
  return {
    submit: (input) =>
      record(`submit ${input.taskId}`, { ok: true, created: true, task: taskView(input.taskId, state) }),
    submitMany: (inputs) =>
      record(
        `submitMany ${inputs.length}`,
        inputs.map((i) => ({ ok: true as const, created: true, task: taskView(i.taskId, state) })),
      ),
    get: (taskId) => record(`get ${taskId}`, taskView(taskId, state)),
    list: () => record('list', { tasks: [], next: null }),
    cancel: (taskId) => record(`cancel ${taskId}`, { ok: true, task: taskView(taskId, state) }),
    retry: (taskId) => record(`retry ${taskId}`, { ok: true, task: taskView(taskId, state) }),
    purge: (input) => record(`purge ${input.state}`, { purged: 0, more: false }),
    resource: (resource) => record(`resource ${resource}`, { resource, owner: null, token: null, remainingMs: null }),
  };
}

/** A pino logger at `level` whose messages are pushed to `into`. */
export function capturingLog(level: string, into: string[]): Logger {
  return pino(
    { level },
    {
      write: (line: string) => {
        into.push((JSON.parse(line) as { msg: string }).msg);
      },
    },
  );
}

export interface TestServer {
  readonly app: FastifyInstance;
  /** The loopback port, or 0 when started with `listen: false` (use `app.inject`). */
  readonly port: number;
  close(): Promise<void>;
}

/** The real admin HTTP server over `tasks`, listening on a free loopback port unless `listen: false`. */
export async function startTestServer(
  tasks: TaskApi,
  options: { log?: Logger; listen?: boolean; extra?: Partial<HttpOptions> } = {},
): Promise<TestServer> {
  const app = createHttpServer({
    adminKeys: [ADMIN_KEY],
    maxPayloadBytes: 65_536,
    tasks,
    metrics: new Metrics(),
    log: options.log ?? pino({ level: 'silent' }),
    readiness: () => Promise.resolve({ ready: true, degraded: false, checks: { etcd: true }, problems: [] }),
    ...options.extra,
  });
  if (options.listen === false) {
    await app.ready();
    return { app, port: 0, close: () => app.close() };
  }
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return { app, port: address.port, close: () => app.close() };
}
