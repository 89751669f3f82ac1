/**
 * The setup of the integration files that drive SDK workers in process: a real etcd, a
 * {@link Stack} (a real SQLite sink), one in-process coordinator on it, its admin client, and SDK
 * workers on the coordinator that are closed after each test.
 *
 * `useSdkStack(options)` registers the hooks (beforeAll: start; afterEach: close the workers;
 * afterAll: stop everything) in the calling file and answers a handle whose members are there once
 * the file's tests run:
 *
 * ```ts
 * const fx = useSdkStack({ prefix: 'test/my-file/', workerIdPrefix: 'mf' });
 * it('completes', async () => {
 *   fx.worker(async (task) => ({ seen: task.taskId }));
 *   await fx.client.submit({ taskId: 't1', resource: 'r1', payload: {} });
 * });
 * ```
 */
import type { Coordinator } from '@leasehold/coordinator';
import type { LeaseholdClient } from '@leasehold/client';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import type { JsonValue } from '@leasehold/protocol';
import { Worker, type TaskHandler, type WorkerOptions } from '@leasehold/worker';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { AdminClient } from './admin-client.js';
import { Stack } from './coordinator.js';

export interface SdkStackOptions {
  /** etcd key prefix of the file. */
  readonly prefix: string;
  /** Worker ids are `<workerIdPrefix>-1`, `-2`, ... unless a worker is given its own. */
  readonly workerIdPrefix: string;
  /** Default 3000 ms. */
  readonly sessionTtlMs?: number;
  /** LEASEHOLD_COORDINATOR_* overrides of the coordinator (e.g. a retry policy). */
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  /** The typed client also reads the sink (`waitForResult`, `sinkEvents`), with the sink's coordinator key. */
  readonly sinkReads?: boolean;
}

export interface WorkerSetup<P, R> {
  /** The coordinator the worker talks to (default: the fixture's). */
  readonly url?: string | undefined;
  /** The sink it writes to (default: the stack's). */
  readonly sinkUrl?: string | undefined;
  readonly workerId?: string | undefined;
  /** Further worker options (a payload schema, a result id, a shutdown grace, ...). */
  readonly options?: Partial<WorkerOptions<P, R>>;
}

export interface SdkStack {
  readonly etcd: EtcdHandle;
  readonly stack: Stack;
  readonly coordinator: Coordinator;
  /** The admin client on the coordinator (status and body; `call` for any route). */
  readonly admin: AdminClient;
  /** The typed `@leasehold/client` on the coordinator (`admin.client`). */
  readonly client: LeaseholdClient;
  /** An SDK worker, running, closed after the test. */
  worker<P = JsonValue, R = JsonValue>(handler: TaskHandler<P, R>, setup?: WorkerSetup<P, R>): Worker<P, R>;
}

class RunningSdkStack implements SdkStack {
  readonly etcd: EtcdHandle;
  readonly stack: Stack;
  readonly coordinator: Coordinator;
  readonly admin: AdminClient;
  readonly #o: SdkStackOptions;
  readonly #workers: Worker<never, never>[] = [];
  #n = 0;

  constructor(o: SdkStackOptions, etcd: EtcdHandle, stack: Stack, coordinator: Coordinator) {
    this.#o = o;
    this.etcd = etcd;
    this.stack = stack;
    this.coordinator = coordinator;
    const sink = o.sinkReads === true ? { sink: { url: stack.sinkUrl, key: stack.keys.sinkKey } } : {};
    this.admin = new AdminClient(coordinator.url, stack.keys.adminKey, sink);
  }

  static async start(o: SdkStackOptions): Promise<RunningSdkStack> {
    const etcd = await startEtcd();
    try {
      const stack = await Stack.start({ etcd, prefix: o.prefix, sessionTtlMs: o.sessionTtlMs ?? 3_000 });
      const coordinator = await stack.coordinator(o.coordinatorEnv);
      return new RunningSdkStack(o, etcd, stack, coordinator);
    } catch (err) {
      await etcd.stop();
      throw err;
    }
  }

  get client(): LeaseholdClient {
    return this.admin.client;
  }

  worker<P = JsonValue, R = JsonValue>(handler: TaskHandler<P, R>, setup: WorkerSetup<P, R> = {}): Worker<P, R> {
    const w = new Worker<P, R>({
      coordinators: [setup.url ?? this.coordinator.url],
      sink: { url: setup.sinkUrl ?? this.stack.sinkUrl },
      credentials: { workerKey: this.stack.keys.workerKey },
      workerId: setup.workerId ?? `${this.#o.workerIdPrefix}-${++this.#n}`,
      handler,
      idleBackoffMs: 50,
      logger: pino({ level: process.env.LEASEHOLD_TEST_LOG_LEVEL ?? 'silent' }),
      ...setup.options,
    });
    void w.run();
    this.#workers.push(w as unknown as Worker<never, never>);
    return w;
  }

  async closeWorkers(): Promise<void> {
    await Promise.all(this.#workers.splice(0).map((w) => w.close(1_000)));
  }

  async close(): Promise<void> {
    await this.closeWorkers();
    await this.admin.close();
    await this.stack.close();
    await this.etcd.stop();
  }
}

/** Start the fixture before the file's tests, close its workers after each, stop it after all. */
export function useSdkStack(options: SdkStackOptions): SdkStack {
  let running: RunningSdkStack | undefined;
  const current = (): RunningSdkStack => {
    if (running === undefined) throw new Error('the SDK stack is used before its beforeAll ran');
    return running;
  };
  beforeAll(async () => {
    running = await RunningSdkStack.start(options);
  }, 60_000);
  afterEach(async () => {
    await running?.closeWorkers();
  });
  afterAll(async () => {
    await running?.close();
  });
  return {
    get etcd() {
      return current().etcd;
    },
    get stack() {
      return current().stack;
    },
    get coordinator() {
      return current().coordinator;
    },
    get admin() {
      return current().admin;
    },
    get client() {
      return current().client;
    },
    worker: (handler, setup) => current().worker(handler, setup),
  };
}
