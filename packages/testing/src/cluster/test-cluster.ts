/**
 * `TestCluster`: leasehold in one process, for unit tests of handlers — no etcd binary, no sink
 * process, no socket. The real coordinator (`createCoordinator`, not listening) on the in-memory
 * etcd (held to real etcd by the coordinator's backend contract), the sink's own service and HTTP
 * app over an in-memory fence store (held to the sink's contract), and workers of the real SDK
 * (`Worker` of `@leasehold/worker`) connected in process.
 *
 * Time: the coordinator and the in-memory etcd run on a {@link ManualClock}: a session never
 * expires and a backoff never ends until the test moves time ({@link TestCluster.advance}). The
 * workers run on real time (their heartbeats, request timeouts and local deadline): a pause is
 * meant to last a test's moment, not seconds.
 *
 * The story a test tells: a worker is granted a task; it pauses ({@link TestWorker.pause}); its
 * lease expires ({@link TestCluster.expire}); a second worker takes the task over; the first wakes
 * up and writes its stale result — and the sink refuses it ({@link TestCluster.results} shows
 * only the second's).
 */
import { randomBytes } from 'node:crypto';
import { createCoordinator, loadConfig, type Coordinator, type TaskView } from '@leasehold/coordinator';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  type JsonValue,
  type RetryPolicyInput,
} from '@leasehold/protocol';
import { Worker, type WorkerOptions } from '@leasehold/worker';
import { pino, type Logger } from 'pino';
import { ManualClock } from '../clock/manual-clock.js';
import { ManualTimers } from '../clock/manual-timers.js';
import { MemoryEtcd } from '../etcd/memory-etcd.js';
import { InMemorySink, type SinkDecision, type StoredResult } from '../sink/in-memory-sink.js';
import { InProcessTransport } from './in-process-transport.js';
import { TestWorker } from './test-worker.js';
import { Valve } from './valve.js';

export interface TestClusterOptions {
  /**
   * Coordinator settings, by their environment names without the `LEASEHOLD_COORDINATOR_` prefix
   * (`SESSION_TTL_MS`, `RETRY_MAX_ATTEMPTS`, …). The defaults keep handler tests about handlers:
   * a 10 s session TTL, retries at once (no backoff, no jitter), lost attempts settled at once,
   * retention off.
   */
  readonly coordinator?: Readonly<Record<string, string>>;
  /** Where the coordinator and the sink log; default silent. */
  readonly logger?: Logger;
  /** Wall-clock time (epoch ms) when the manual clock reads 0; default 2027-01-15. */
  readonly epochMs?: number;
}

/** What a test's worker takes: the SDK's options, without what the cluster provides. */
export type TestWorkerOptions = Omit<WorkerOptions, 'coordinators' | 'sink' | 'credentials' | 'transport'>;

/** A task to submit (as `POST /v1/tasks` takes it). */
export interface TestTask {
  readonly taskId: string;
  readonly resource: string;
  readonly payload: JsonValue;
  readonly priority?: number;
  readonly delayMs?: number;
  readonly retry?: RetryPolicyInput;
}

const COORDINATOR_URL = 'inproc://coordinator';
const SINK_KEY = 'leasehold-testing-sink-key-0001';
const ADMIN_KEY = 'leasehold-testing-admin-key-001';
const WORKER_KEY = 'leasehold-testing-worker-key-01';

const DEFAULTS: Readonly<Record<string, string>> = {
  SESSION_TTL_MS: '10000',
  HEARTBEAT_INTERVAL_MS: '1000',
  RETRY_INITIAL_MS: '0',
  RETRY_JITTER: '0',
  SETTLE_GRACE_MS: '0',
  RETENTION: 'false',
  LOG_LEVEL: 'silent',
};

/** Let in-process work settle: promise chains, `setImmediate` batches, watch deliveries. */
async function settle(turns = 10): Promise<void> {
  for (let i = 0; i < turns; i += 1) await new Promise<void>((resolve) => setImmediate(resolve));
}

export class TestCluster {
  /** The coordinator's and the in-memory etcd's monotonic clock. */
  readonly clock: ManualClock;
  readonly timers: ManualTimers;
  /** The in-memory etcd (its keys: `etcd.keys('leasehold/')`). */
  readonly etcd: MemoryEtcd;
  readonly sink: InMemorySink;
  readonly coordinator: Coordinator;
  readonly #sessionTtlMs: number;
  readonly #logger: Logger;
  readonly #workers = new Set<TestWorker>();
  readonly #wallClock: () => number;
  #workerSeq = 0;

  private constructor(parts: {
    clock: ManualClock;
    timers: ManualTimers;
    etcd: MemoryEtcd;
    sink: InMemorySink;
    coordinator: Coordinator;
    sessionTtlMs: number;
    logger: Logger;
    wallClock: () => number;
  }) {
    this.clock = parts.clock;
    this.timers = parts.timers;
    this.etcd = parts.etcd;
    this.sink = parts.sink;
    this.coordinator = parts.coordinator;
    this.#sessionTtlMs = parts.sessionTtlMs;
    this.#logger = parts.logger;
    this.#wallClock = parts.wallClock;
  }

  static async start(options: TestClusterOptions = {}): Promise<TestCluster> {
    const logger = options.logger ?? pino({ level: 'silent' });
    const clock = new ManualClock(0);
    const timers = new ManualTimers(clock);
    const epochMs = options.epochMs ?? Date.UTC(2027, 0, 15);
    const wallClock = (): number => epochMs + clock.nowMs();
    const etcd = new MemoryEtcd({ clock, timers });
    // A signing key of this cluster's own: the sink accepts the capabilities its coordinator signs.
    const signing = `k1:${generateCapabilitySeed(randomBytes)}`;
    const sink = await InMemorySink.start({
      coordinatorKey: SINK_KEY,
      capabilityPublicKeys: publicKeyEntryOf(parseCapabilitySigningKey(signing)),
      wallClock,
      logger,
    });
    const env = { ...DEFAULTS, ...options.coordinator };
    const config = loadConfig(
      {
        ...Object.fromEntries(Object.entries(env).map(([k, v]) => [`LEASEHOLD_COORDINATOR_${k}`, v])),
        LEASEHOLD_COORDINATOR_SINK_URL: 'http://sink.invalid',
        LEASEHOLD_COORDINATOR_SINK_KEY: SINK_KEY,
        LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: signing,
        LEASEHOLD_COORDINATOR_ADMIN_KEYS: ADMIN_KEY,
        // Any worker id on one key: a test names its workers freely (never do this in production).
        LEASEHOLD_COORDINATOR_WORKER_KEYS: WORKER_KEY,
      },
      [],
    );
    const coordinator = await createCoordinator(config, {
      logger,
      clock,
      timers,
      wallClock,
      random: () => 0.5,
      backend: etcd.connect(),
      fenceTarget: sink.fenceTarget,
      listen: false,
    });
    const cluster = new TestCluster({
      clock,
      timers,
      etcd,
      sink,
      coordinator,
      sessionTtlMs: config.sessionTtlMs,
      logger,
      wallClock,
    });
    await settle();
    return cluster;
  }

  /** Wall-clock time of the cluster (epoch ms): the manual clock plus the epoch. */
  nowMs(): number {
    return this.#wallClock();
  }

  /** Submit a task; its view. Throws on a refusal (a conflicting definition, a payload too large). */
  async submit(task: TestTask): Promise<TaskView> {
    const res = await this.coordinator.tasks.submit(task);
    if (!res.ok) throw new Error(`submit of ${task.taskId} refused: ${res.code}: ${res.message}`);
    await settle();
    return res.task;
  }

  /** A task as the admin API shows it (with its payload and attempt history). */
  task(taskId: string): Promise<TaskView | undefined> {
    return this.coordinator.tasks.get(taskId);
  }

  /** A worker of the SDK on this cluster, started (`worker.run()` is under way). */
  worker(options: TestWorkerOptions): TestWorker {
    const valve = new Valve();
    const transport = new InProcessTransport(new Map([[COORDINATOR_URL, this.coordinator]]), valve);
    const worker = new Worker({
      logger: this.#logger,
      ...options,
      workerId: options.workerId ?? `worker-${++this.#workerSeq}`,
      coordinators: [COORDINATOR_URL],
      sink: this.sink.writer((write) => valve.write(write)),
      credentials: { workerKey: WORKER_KEY },
      transport,
    });
    const handle = new TestWorker(worker, valve, transport);
    this.#workers.add(handle);
    void worker.run();
    return handle;
  }

  /** Move the coordinator's time forward by `ms`, firing session deadlines, backoffs and long polls on the way. */
  async advance(ms: number): Promise<void> {
    await this.timers.advance(ms, () => settle(4));
    await settle();
  }

  /**
   * End `worker`'s session as the coordinator does at its deadline: the worker is paused (so it
   * stops heartbeating), and the coordinator's time moves past the session TTL. Resolves once the
   * coordinator no longer counts any of its grants held — its tasks are free to take over.
   */
  async expire(worker: TestWorker): Promise<void> {
    worker.pause();
    const held = worker.held();
    await this.advance(this.#sessionTtlMs + 1);
    await this.waitFor(async () => {
      for (const grant of held) {
        const view = await this.coordinator.tasks.resource(grant.resource);
        if (view.token === grant.token.toString()) return false;
      }
      return true;
    }, `the coordinator still counts ${worker.workerId}'s grants held`);
  }

  /**
   * Take `from`'s task over: expire its session, start a worker with `options` and resolve with
   * its grant of the task `from` held (its token is greater: the fence moved to it first).
   */
  async takeOver(
    from: TestWorker,
    options: TestWorkerOptions,
  ): Promise<{ readonly worker: TestWorker; readonly token: bigint; readonly taskId: string }> {
    const [held] = from.held();
    if (held === undefined) throw new Error(`${from.workerId} holds no task to take over`);
    await this.expire(from);
    const worker = this.worker(options);
    const grant = await worker.next('granted', (e) => e.taskId === held.taskId);
    return { worker, token: grant.token, taskId: grant.taskId };
  }

  /** Results the sink stored for `resource`, oldest first. */
  results(resource: string): Promise<StoredResult[]> {
    return this.sink.results(resource);
  }

  /** The sink's fence of `resource`. */
  fence(resource: string): Promise<bigint> {
    return this.sink.fence(resource);
  }

  /** The sink's decisions (advances, writes, refusals), of `resource` when given. */
  decisions(resource?: string): Promise<SinkDecision[]> {
    return this.sink.decisions(resource);
  }

  /** Wait (real time, up to `timeoutMs`) until `condition` holds, letting in-process work run between checks. */
  async waitFor(condition: () => boolean | Promise<boolean>, what = 'condition', timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await condition()) return;
      if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
      await settle(2);
      await new Promise<void>((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Stop everything: the workers first (while the coordinator still answers them), then the coordinator and the sink. */
  async close(): Promise<void> {
    const workers = [...this.#workers];
    this.#workers.clear();
    await Promise.all(workers.map((w) => w.close(0)));
    await this.coordinator.close();
    await this.sink.close();
  }
}
