/**
 * The setups integration files share, as vitest fixtures: each `use…` call registers the hooks of
 * the calling file (start before its tests, clean up after) and answers at once, at collection.
 *
 * - `useStack(settings)`: a real etcd (its own, on free loopback ports) and a {@link Stack} on it
 *   (a real SQLite sink in process; coordinators and workers on demand), stopped after the file.
 * - `useSdkStack(options)`: that, plus one in-process coordinator, its admin client and typed
 *   client, and SDK workers on it that are closed after each test.
 * - `useCluster(options)`: a {@link Cluster} of real processes (e2e), started before the file's
 *   tests and stopped after them.
 *
 * ```ts
 * const stack = useStack({ prefix: 'test/my-file/', sessionTtlMs: 2_000 });
 * const fx = useSdkStack({ prefix: 'test/my-other-file/', workerIdPrefix: 'mf' });
 * it('completes', async () => {
 *   fx.worker(async (task) => ({ seen: task.taskId }));
 *   await fx.client.submit({ taskId: 't1', resource: 'r1', payload: {} });
 * });
 * ```
 */
import type { Coordinator } from '@leasehold/coordinator';
import type { LeaseholdClient } from '@leasehold/client';
import { startEtcd, type EtcdHandle, type StartEtcdOptions } from '@leasehold/devkit';
import type { JsonValue } from '@leasehold/protocol';
import { Worker, type TaskHandler, type WorkerOptions } from '@leasehold/worker';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { AdminClient } from './admin-client.js';
import { startCluster, type Cluster, type ClusterOptions } from './cluster.js';
import { Stack, type StackSettings } from './coordinator.js';

export interface StackFixtureOptions extends StackSettings {
  /** How the file's etcd is started (e.g. `extraArgs` for a quota). */
  readonly etcd?: StartEtcdOptions;
}

/** A {@link Stack} for the calling file: its etcd and sink start before the file's tests and stop after them. */
export function useStack(options: StackFixtureOptions): Stack {
  const { etcd: etcdOptions, ...settings } = options;
  const stack = Stack.create(settings);
  let etcd: EtcdHandle | undefined;
  beforeAll(async () => {
    etcd = await startEtcd(etcdOptions);
    await stack.open(etcd);
  });
  afterAll(async () => {
    if (etcd === undefined) return;
    await stack.close();
    await etcd.stop();
  });
  return stack;
}

export interface SdkStackOptions extends StackFixtureOptions {
  /** Worker ids are `<workerIdPrefix>-1`, `-2`, ... unless a worker is given its own. */
  readonly workerIdPrefix: string;
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
  readonly stack: Stack;
  readonly coordinator: Coordinator;
  /** The admin client on the coordinator (status and body; `call` for any route). */
  readonly admin: AdminClient;
  /** The typed `@leasehold/client` on the coordinator (`admin.client`). */
  readonly client: LeaseholdClient;
  /** An SDK worker, running, closed after the test. */
  worker<P = JsonValue, R = JsonValue>(handler: TaskHandler<P, R>, setup?: WorkerSetup<P, R>): Worker<P, R>;
}

/** {@link useStack} + one in-process coordinator, its clients and SDK workers closed after each test. */
export function useSdkStack(options: SdkStackOptions): SdkStack {
  const { workerIdPrefix, coordinatorEnv, sinkReads, ...stackOptions } = options;
  const stack = useStack({ sessionTtlMs: 3_000, ...stackOptions });
  let coordinator: Coordinator | undefined;
  let admin: AdminClient | undefined;
  const workers: Worker<never, never>[] = [];
  let n = 0;
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the SDK stack is used before its beforeAll ran');
    return value;
  };
  const closeWorkers = () => Promise.all(workers.splice(0).map((w) => w.close(1_000)));
  // Registered after useStack's hooks: runs once the stack is open, and cleans up before it closes.
  beforeAll(async () => {
    coordinator = await stack.coordinator(coordinatorEnv);
    const sink = sinkReads === true ? { sink: { url: stack.sinkUrl, key: stack.keys.sinkKey } } : {};
    admin = new AdminClient(coordinator.url, stack.keys.adminKey, sink);
  });
  afterEach(async () => {
    await closeWorkers();
  });
  afterAll(async () => {
    await closeWorkers();
    await admin?.close();
  });
  return {
    stack,
    get coordinator() {
      return ready(coordinator);
    },
    get admin() {
      return ready(admin);
    },
    get client() {
      return ready(admin).client;
    },
    worker<P = JsonValue, R = JsonValue>(handler: TaskHandler<P, R>, setup: WorkerSetup<P, R> = {}): Worker<P, R> {
      const w = new Worker<P, R>({
        coordinators: [setup.url ?? ready(coordinator).url],
        sink: { url: setup.sinkUrl ?? stack.sinkUrl },
        credentials: { workerKey: stack.keys.workerKey },
        workerId: setup.workerId ?? `${workerIdPrefix}-${++n}`,
        handler,
        idleBackoffMs: 50,
        logger: pino({ level: process.env.LEASEHOLD_TEST_LOG_LEVEL ?? 'silent' }),
        ...setup.options,
      });
      void w.run();
      workers.push(w as unknown as Worker<never, never>);
      return w;
    },
  };
}

/**
 * A {@link Cluster} of real processes for the calling file: started before its tests, stopped after
 * them. The answer stands for the cluster (each member read from it once it is up).
 */
export function useCluster(options: ClusterOptions): Cluster {
  let cluster: Cluster | undefined;
  beforeAll(async () => {
    cluster = await startCluster(options);
  });
  afterAll(async () => {
    await cluster?.stop();
  });
  return new Proxy({} as Cluster, {
    get(_, member) {
      if (cluster === undefined) throw new Error('the cluster is used before its beforeAll ran');
      return Reflect.get(cluster, member) as unknown;
    },
  });
}
