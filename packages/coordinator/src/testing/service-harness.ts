/**
 * Deterministic harness for the coordinator's real services (sessions, grants, leases, tasks, the
 * watch feed): one in-memory etcd, a manual clock and timers, an in-memory fence target with the
 * sink's rules, and any number of coordinators sharing them — each with its own etcd client, so a
 * test can partition one, hold its watch back (a stale index), or hold its fence advances (a
 * coordinator paused between the grant txn and the advance). No sockets, no real time.
 */
import {
  decideAdvance,
  decideWrite,
  PROTOCOL_VERSION,
  type Complete,
  type CoordinatorMessage,
  type Hello,
} from '@leasehold/protocol';
import { pino } from 'pino';
import { afterEach, beforeEach } from 'vitest';
import { loadConfig, type CoordinatorConfig } from '../config.js';
import { SinkUnavailableError } from '../errors.js';
import { KeyLayout } from '../etcd/keys.js';
import { leaseStoreOf } from '../etcd/etcd-store.js';
import type { KvLeaseStore } from '../etcd/lease-store.js';
import { ManualClock, ManualTimers, MemoryEtcd, type MemoryBackend } from '@leasehold/testing';
import type { AdvanceGrantFacts, AdvanceItem, AdvanceItemResult, FenceTarget } from '../fence/port.js';
import { Metrics } from '../metrics.js';
import type { WorkerChannel } from '../service/channel.js';
import type { LocalSession } from '../service/sessions.js';
import type { SubmitInput } from '../service/tasks.js';
import { createServices, type ServiceDeps, type Services } from '../services.js';
import { settle } from './settle.js';

export const TEST_KEYS = {
  /** `id:<Ed25519 seed>`: signs the capabilities of the service tests. */
  capability: 'k1:QB_-qbJZ48ZusN7G4Myyu_9kSJcCfj8MXniWvq2DmFs',
  worker: 'worker-key-for-service-tests-0001',
  admin: 'admin-key-for-service-tests-00001',
  sink: 'sink-key-for-service-tests-000001',
};

export function testConfig(env: Record<string, string> = {}): CoordinatorConfig {
  return loadConfig(
    {
      LEASEHOLD_COORDINATOR_SINK_URL: 'http://127.0.0.1:1',
      LEASEHOLD_COORDINATOR_SINK_KEY: TEST_KEYS.sink,
      LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: TEST_KEYS.capability,
      LEASEHOLD_COORDINATOR_WORKER_KEYS: TEST_KEYS.worker,
      LEASEHOLD_COORDINATOR_ADMIN_KEYS: TEST_KEYS.admin,
      LEASEHOLD_COORDINATOR_SESSION_TTL_MS: '3000',
      LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: '1000',
      LEASEHOLD_COORDINATOR_LOG_LEVEL: 'silent',
      // Lifecycle defaults that keep the lease tests about leases: retries at once, many of them,
      // lost attempts settled at once. The lifecycle tests set their own.
      LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS: '100',
      LEASEHOLD_COORDINATOR_RETRY_INITIAL_MS: '0',
      LEASEHOLD_COORDINATOR_RETRY_JITTER: '0',
      LEASEHOLD_COORDINATOR_SETTLE_GRACE_MS: '0',
      // Retention off: ended tasks stay (the retention tests turn it on with their own limits).
      LEASEHOLD_COORDINATOR_RETENTION: 'false',
      ...Object.fromEntries(Object.entries(env).map(([k, v]) => [`LEASEHOLD_COORDINATOR_${k}`, v])),
    },
    [],
  );
}

export interface FenceEvent {
  readonly kind: 'advance' | 'write';
  readonly resource: string;
  readonly token: bigint;
  readonly outcome: string;
  /** Order of decisions at the fence. */
  readonly seq: number;
}

/**
 * The sink's fence rules in memory: per-resource fence, advance only grows, a write is accepted
 * only at `token == fence`. `hold()` keeps advances waiting (a coordinator paused after its grant
 * txn), `down` makes them fail with an unknown outcome.
 */
export class MemoryFenceTarget implements FenceTarget {
  readonly fences = new Map<string, bigint>();
  readonly log: FenceEvent[] = [];
  /** The grant the last advance of each resource named (what a vouch would cover). */
  readonly grants = new Map<string, AdvanceGrantFacts | undefined>();
  down = false;
  #held: (() => void)[] | undefined;
  #parked: (() => void)[] = [];
  #seq = 0;

  fence(resource: string): bigint {
    return this.fences.get(resource) ?? 0n;
  }

  /** Advances wait until {@link release}. */
  hold(): void {
    this.#held ??= [];
  }

  /** The advances waiting now stay held until {@link release}; later ones pass. */
  holdCurrent(): void {
    this.#parked.push(...(this.#held ?? []));
    this.#held = undefined;
  }

  release(): void {
    const held = [...this.#parked, ...(this.#held ?? [])];
    this.#held = undefined;
    this.#parked = [];
    for (const go of held) go();
  }

  get heldCount(): number {
    return this.#parked.length + (this.#held?.length ?? 0);
  }

  async advanceBatch(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> {
    const held = this.#held;
    if (held !== undefined) await new Promise<void>((resolve) => held.push(resolve));
    if (this.down) throw new SinkUnavailableError('sink unreachable (test)');
    return items.map((item) => {
      this.grants.set(item.resource, item.grant);
      const decision = decideAdvance(this.fence(item.resource), item.token);
      this.log.push({
        kind: 'advance',
        resource: item.resource,
        token: item.token,
        outcome: decision.ok ? decision.outcome : decision.code,
        seq: this.#seq++,
      });
      if (!decision.ok) return { ok: false, resource: item.resource, code: 'STALE_TOKEN', fence: decision.fence };
      this.fences.set(item.resource, decision.fence);
      return { ok: true, resource: item.resource, outcome: decision.outcome, fence: decision.fence };
    });
  }

  /** A worker's write under `token`: accepted only at the fence. */
  write(
    resource: string,
    token: bigint,
  ): 'written' | 'replayed' | 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT' {
    const decision = decideWrite(this.fence(resource), token, undefined, '{}');
    const outcome = decision.ok ? decision.outcome : decision.code;
    this.log.push({ kind: 'write', resource, token, outcome, seq: this.#seq++ });
    return outcome;
  }

  ping(): Promise<boolean> {
    return Promise.resolve(!this.down);
  }
}

/** A worker connection that records what the coordinator sent it. */
export class RecordingChannel implements WorkerChannel {
  readonly sent: CoordinatorMessage[] = [];
  closed: { readonly code: number; readonly reason: string } | undefined;

  get isOpen(): boolean {
    return this.closed === undefined;
  }

  send(message: CoordinatorMessage): boolean {
    if (!this.isOpen) return false;
    this.sent.push(message);
    return true;
  }

  close(code: number, reason: string): void {
    this.closed ??= { code, reason };
  }

  pushes<T extends CoordinatorMessage['type']>(type: T): Extract<CoordinatorMessage, { type: T }>[] {
    return this.sent.filter((m): m is Extract<CoordinatorMessage, { type: T }> => m.type === type);
  }
}

export interface TestCoordinator {
  readonly id: string;
  readonly services: Services;
  readonly backend: MemoryBackend;
  readonly store: KvLeaseStore;
}

export interface TestWorkerHandle {
  readonly workerId: string;
  readonly incarnation: string;
  readonly channel: RecordingChannel;
  session: LocalSession;
  coordinator: TestCoordinator;
}

let messageIds = 0;
export const nextId = (): string => `m${++messageIds}`;

/** Wall-clock epoch of the service tests: wall time = EPOCH_MS + the manual clock. */
export const EPOCH_MS = 1_800_000_000_000;

export class ServiceCluster {
  readonly clock = new ManualClock(10_000);
  /** Wall clock (epoch ms) moving with the manual clock. */
  readonly wallClock = (): number => EPOCH_MS + this.clock.nowMs();
  readonly timers = new ManualTimers(this.clock);
  readonly etcd = new MemoryEtcd({ clock: this.clock, timers: this.timers });
  readonly fence = new MemoryFenceTarget();
  readonly keys = new KeyLayout('svc/');
  readonly coordinators: TestCoordinator[] = [];
  readonly config: CoordinatorConfig;

  constructor(env: Record<string, string> = {}) {
    this.config = testConfig(env);
  }

  /** `seams`: the dependency-injection seams of {@link createServices} a test sets (default none). */
  async coordinator(
    id = `c${this.coordinators.length + 1}`,
    seams: Pick<ServiceDeps, 'retryPolicyOf'> = {},
  ): Promise<TestCoordinator> {
    const backend = this.etcd.connect();
    const metrics = new Metrics();
    // As the daemon builds it: write txns ready at once share etcd requests (ETCD_COMBINED_REQUESTS).
    const store = leaseStoreOf(backend, { ...this.config.etcd, prefix: this.keys.prefix }, metrics);
    const services = createServices({
      ...seams,
      config: this.config,
      coordinatorId: id,
      store,
      fenceTarget: this.fence,
      clock: this.clock,
      wallClock: this.wallClock,
      random: () => 0.5,
      timers: this.timers,
      log: pino({ level: 'silent' }),
      metrics,
    });
    await services.start();
    const c = { id, services, backend, store };
    this.coordinators.push(c);
    await this.settle();
    return c;
  }

  /**
   * Time that passes while a coordinator decides (a busy event loop, a timer firing a moment before
   * the wall clock's due time): right after its index's `n`-th select from now on (0-based), the
   * clock moves `jump(n)` ms, unseen by the timers until the next {@link advance}.
   */
  jumpAfterSelects(c: TestCoordinator, jump: (n: number) => number): void {
    const index = c.services.index;
    const select = index.select.bind(index);
    let n = 0;
    index.select = (query) => {
      const found = select(query);
      const ms = jump(n++);
      if (ms > 0) this.clock.advance(ms);
      return found;
    };
  }

  /** Let in-process work finish (promise chains, batches, watch deliveries). */
  settle(): Promise<void> {
    return settle(20);
  }

  /** Move time forward, firing due timers (session deadlines, long polls, lease expiry) in order. */
  async advance(ms: number): Promise<void> {
    await this.timers.advance(ms, () => settle(8));
    await this.settle();
  }

  async submit(
    c: TestCoordinator,
    taskId: string,
    resource: string,
    payload: unknown = { n: 1 },
    options: Omit<SubmitInput, 'taskId' | 'resource' | 'payload'> = {},
  ) {
    const res = await c.services.tasks.submit({ taskId, resource, payload: payload as never, ...options });
    if (!res.ok) throw new Error(`submit failed: ${res.code}`);
    await this.settle();
    return res.task;
  }

  async worker(
    c: TestCoordinator,
    workerId: string,
    incarnation = 'inc-1',
    capacity = 100,
    queues?: readonly string[],
  ): Promise<TestWorkerHandle> {
    const channel = new RecordingChannel();
    const opened = await c.services.sessions.open(
      { ...this.hello(workerId, incarnation), capacity, ...(queues === undefined ? {} : { queues: [...queues] }) },
      channel,
    );
    await this.settle();
    return { workerId, incarnation, channel, session: opened.session, coordinator: c };
  }

  /** Resume `w`'s session on coordinator `c` (a reconnect / failover); the result of the open. */
  async resume(w: TestWorkerHandle, c: TestCoordinator) {
    const channel = new RecordingChannel();
    const opened = await c.services.sessions.open(
      { ...this.hello(w.workerId, w.incarnation), resumeSessionId: w.session.sessionId },
      channel,
    );
    await this.settle();
    return { opened, channel };
  }

  hello(workerId: string, incarnation: string): Hello {
    return { type: 'hello', id: nextId(), protocolVersion: PROTOCOL_VERSION, workerId, incarnation, capacity: 100 };
  }

  acquire(
    w: TestWorkerHandle,
    options: { requestId?: string; taskId?: string; waitMs?: number; queues?: readonly string[] } = {},
  ) {
    return w.coordinator.services.grants.acquire(
      w.session,
      {
        type: 'lease.acquire',
        id: nextId(),
        requestId: options.requestId ?? `q-${nextId()}`,
        ...(options.taskId === undefined ? {} : { taskId: options.taskId }),
        ...(options.waitMs === undefined ? {} : { waitMs: options.waitMs }),
        ...(options.queues === undefined ? {} : { queues: [...options.queues] }),
      },
      this.clock.nowMs(),
    );
  }

  renew(w: TestWorkerHandle, resource: string, token: bigint, atMs = this.clock.nowMs()) {
    return w.coordinator.services.leases.renew(
      w.session,
      { type: 'lease.renew', id: nextId(), resource, token: token.toString(), incarnation: w.incarnation },
      atMs,
    );
  }

  release(w: TestWorkerHandle, resource: string, token: bigint) {
    return w.coordinator.services.leases.release(w.session, {
      type: 'lease.release',
      id: nextId(),
      resource,
      token: token.toString(),
      incarnation: w.incarnation,
    });
  }

  complete(w: TestWorkerHandle, taskId: string, resource: string, token: bigint) {
    return w.coordinator.services.leases.complete(w.session, this.completeMessage(w, taskId, resource, token));
  }

  /** `w`'s `task.complete` of `taskId` at `token` (result id `task:<taskId>`), with `extra` fields such as `next`. */
  completeMessage(
    w: TestWorkerHandle,
    taskId: string,
    resource: string,
    token: bigint,
    extra: Pick<Complete, 'next'> = {},
  ): Complete {
    return {
      type: 'task.complete',
      id: nextId(),
      taskId,
      resultId: `task:${taskId}`,
      resource,
      token: token.toString(),
      incarnation: w.incarnation,
      ...extra,
    };
  }

  fail(
    w: TestWorkerHandle,
    taskId: string,
    resource: string,
    token: bigint,
    error: { name: string; message: string; retryable: boolean } = { name: 'Error', message: 'boom', retryable: true },
  ) {
    return w.coordinator.services.leases.fail(w.session, {
      type: 'task.fail',
      id: nextId(),
      taskId,
      resource,
      token: token.toString(),
      incarnation: w.incarnation,
      error,
    });
  }

  heartbeat(w: TestWorkerHandle, atMs = this.clock.nowMs()) {
    return w.coordinator.services.sessions.heartbeat(w.session, atMs);
  }

  /** The live owner keys in the store: resource -> token. */
  owners(): Map<string, bigint> {
    return new Map(
      this.etcd.keys(this.keys.owners).map((kv) => [kv.key.slice(this.keys.owners.length), kv.createRevision]),
    );
  }

  async close(): Promise<void> {
    for (const c of this.coordinators) await c.services.close();
    this.fence.release();
    await this.settle();
  }
}

/** The grant's token, or a readable failure. */
export function tokenOf(reply: CoordinatorMessage): bigint {
  if (reply.type !== 'lease.granted') throw new Error(`expected lease.granted, got ${JSON.stringify(reply)}`);
  return BigInt(reply.token);
}

/**
 * A fresh cluster (with `env`) and its first coordinator for each test of the file or describe this
 * is called in, handed to `set`; closed after each test.
 */
export function eachServiceCluster(
  set: (cluster: ServiceCluster, c1: TestCoordinator) => void | Promise<void>,
  env: Record<string, string> = {},
): void {
  let cluster: ServiceCluster | undefined;
  beforeEach(async () => {
    cluster = new ServiceCluster(env);
    await set(cluster, await cluster.coordinator());
  });
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });
}
