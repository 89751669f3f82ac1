/**
 * Coordinator harness for integration tests:
 * - a real sink in-process (`createSink`, SQLite in a temp dir) with its client;
 * - coordinators in-process (`createCoordinator`) or as the BUILT process (`dist/main.js`, through
 *   {@link Service}: `--port 0 --port-file`, SIGKILL / SIGSTOP / restart);
 * - {@link TestWorker}: a small WebSocket client over `ws` speaking raw protocol frames;
 * - the admin client (admin-client.ts) on a coordinator, and an etcd snapshot helper (to assert
 *   "nothing changed in etcd").
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCoordinator, loadConfig, type Coordinator, type CoordinatorDeps } from '@leasehold/coordinator';
import {
  CoordinatorMessageSchema,
  PROTOCOL_VERSION,
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeysOf,
  type CapabilitySigningKey,
  type CoordinatorMessage,
  type Welcome,
} from '@leasehold/protocol';
import { createSink, type Sink } from '@leasehold/sink';
import { SinkClient } from '@leasehold/sink-client';
import { Etcd3 } from 'etcd3';
import { pino } from 'pino';
import WebSocket from 'ws';
import type { EtcdHandle } from '@leasehold/devkit';
import { AdminClient } from './admin-client.js';
import { BIN, Service } from './service.js';

export { AdminClient } from './admin-client.js';

const secret = (): string => randomBytes(18).toString('base64url');

function newStackKeys(): StackKeys {
  const capabilityText = `k1:${generateCapabilitySeed(randomBytes)}`;
  return {
    sinkKey: secret(),
    capability: parseCapabilitySigningKey(capabilityText),
    capabilityText,
    workerKey: secret(),
    adminKey: secret(),
  };
}

export interface StackKeys {
  readonly sinkKey: string;
  /** The coordinators' capability signing key (the sink holds its public key only). */
  readonly capability: CapabilitySigningKey;
  /** Its `id:<seed>` form, for LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY. */
  readonly capabilityText: string;
  readonly workerKey: string;
  readonly adminKey: string;
}

/** A stack's settings; the etcd is given when it is opened. */
export interface StackSettings {
  /** etcd key prefix of this test file. */
  readonly prefix: string;
  readonly sessionTtlMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly fenceOnExpiry?: boolean;
}

export interface StackOptions extends StackSettings {
  readonly etcd: EtcdHandle;
}

/**
 * etcd + a real in-process sink + the environment a coordinator needs to use them. `Stack.start`
 * opens one at once; `Stack.create` + `open(etcd)` split it for a file's hooks (`useStack` in
 * fixtures.ts: the stack exists when the file is collected, its etcd and sink once it runs).
 */
export class Stack {
  readonly keys: StackKeys = newStackKeys();
  readonly dir = mkdtempSync(join(tmpdir(), 'leasehold-coord-test-'));
  readonly opts: StackSettings;
  sink!: Sink;
  sinkClient!: SinkClient;
  #etcd: EtcdHandle | undefined;
  readonly #coordinators: Coordinator[] = [];
  readonly #services: Service[] = [];
  readonly #admins: AdminClient[] = [];

  private constructor(opts: StackSettings) {
    this.opts = opts;
  }

  static async start(opts: StackOptions): Promise<Stack> {
    const stack = Stack.create(opts);
    await stack.open(opts.etcd);
    return stack;
  }

  /** A stack not opened yet: keys and directory only. */
  static create(settings: StackSettings): Stack {
    return new Stack(settings);
  }

  /** Start the sink; coordinators of this stack use `etcd`. */
  async open(etcd: EtcdHandle): Promise<void> {
    this.#etcd = etcd;
    this.sink = await createSink({
      host: '127.0.0.1',
      port: 0,
      dbPath: join(this.dir, 'sink.db'),
      synchronous: 'NORMAL',
      storeThread: false,
      decisionRetention: 0,
      bodyLimitBytes: 1024 * 1024,
      maxBatchOps: 2000,
      shutdownTimeoutMs: 2000,
      coordinatorKeys: [this.keys.sinkKey],
      readKeys: [],
      capabilityPublicKeys: publicKeysOf(this.keys.capability),
    });
    this.sinkClient = new SinkClient({ url: this.sinkUrl, key: this.keys.sinkKey, timeoutMs: 5000 });
  }

  get etcd(): EtcdHandle {
    if (this.#etcd === undefined) throw new Error('the stack is not open yet');
    return this.#etcd;
  }

  get sinkUrl(): string {
    const address = this.sink.address;
    if (address === null) throw new Error('sink is not listening');
    return `http://127.0.0.1:${address.port}`;
  }

  /** Coordinator environment (LEASEHOLD_COORDINATOR_*) for this stack. */
  env(overrides: Readonly<Record<string, string>> = {}): Record<string, string> {
    const ttl = this.opts.sessionTtlMs ?? 1_000;
    return {
      LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: this.etcd.endpoints.join(','),
      LEASEHOLD_COORDINATOR_PREFIX: this.opts.prefix,
      LEASEHOLD_COORDINATOR_HOST: '127.0.0.1',
      LEASEHOLD_COORDINATOR_PORT: '0',
      LEASEHOLD_COORDINATOR_SINK_URL: this.sinkUrl,
      LEASEHOLD_COORDINATOR_SINK_KEY: this.keys.sinkKey,
      LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: this.keys.capabilityText,
      LEASEHOLD_COORDINATOR_WORKER_KEYS: this.keys.workerKey,
      LEASEHOLD_COORDINATOR_ADMIN_KEYS: this.keys.adminKey,
      LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(ttl),
      LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: String(this.opts.heartbeatIntervalMs ?? Math.floor(ttl / 4)),
      LEASEHOLD_COORDINATOR_FENCE_ON_EXPIRY: String(this.opts.fenceOnExpiry ?? false),
      LEASEHOLD_COORDINATOR_LOG_LEVEL: process.env.LEASEHOLD_TEST_LOG_LEVEL ?? 'silent',
      ...overrides,
    };
  }

  /** An in-process coordinator on a free port. */
  async coordinator(
    overrides: Readonly<Record<string, string>> = {},
    deps: Omit<CoordinatorDeps, 'logger'> = {},
  ): Promise<Coordinator> {
    const config = loadConfig(this.env(overrides));
    const logger = pino({ level: config.logLevel });
    const c = await createCoordinator(config, { logger, ...deps });
    this.#coordinators.push(c);
    return c;
  }

  /** The built coordinator (`dist/main.js`) as a child process; started before return. */
  async spawnCoordinator(name: string, overrides: Readonly<Record<string, string>> = {}): Promise<Service> {
    const env = this.env({ LEASEHOLD_COORDINATOR_LOG_LEVEL: 'info', ...overrides });
    const service = new Service({ name, bin: BIN.coordinator, dir: this.dir, listens: true, env });
    this.#services.push(service);
    await service.start();
    return service;
  }

  /** The admin client on `url` with this stack's admin key (closed with the stack). */
  admin(url: string): AdminClient {
    const admin = new AdminClient(url, this.keys.adminKey);
    this.#admins.push(admin);
    return admin;
  }

  async worker(url: string, workerId: string, incarnation = 'inc-1'): Promise<TestWorker> {
    const w = await TestWorker.connect(url, this.keys.workerKey);
    await w.hello(workerId, incarnation);
    return w;
  }

  async close(): Promise<void> {
    await Promise.all(this.#admins.map((a) => a.close()));
    await Promise.all(this.#coordinators.map((c) => c.close()));
    await Promise.all(this.#services.map((s) => s.stop()));
    for (const s of this.#services) s.close();
    void this.sinkClient.close();
    await this.sink.close();
    if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined) rmSync(this.dir, { recursive: true, force: true });
  }
}

let nextId = 0;
const newId = (): string => `m${++nextId}`;

/** A worker's WebSocket with raw frames, replies matched by `inReplyTo`, pushes recorded. */
export class TestWorker {
  readonly socket: WebSocket;
  readonly received: CoordinatorMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  welcome: Welcome | undefined;
  readonly #waiters: { match: (m: CoordinatorMessage) => boolean; resolve: (m: CoordinatorMessage) => void }[] = [];

  private constructor(socket: WebSocket) {
    this.socket = socket;
    this.closed = new Promise((resolve) => {
      socket.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString() });
      });
    });
    socket.on('message', (data: Buffer) => {
      const message = CoordinatorMessageSchema.parse(JSON.parse(data.toString('utf8')));
      this.received.push(message);
      for (const w of [...this.#waiters]) {
        if (w.match(message)) {
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          w.resolve(message);
        }
      }
    });
  }

  /** Open `/v1/worker`; rejects with the HTTP status when the upgrade is refused. */
  static connect(baseUrl: string, key: string | undefined, options: { maxPayload?: number } = {}): Promise<TestWorker> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/v1/worker`;
    const socket = new WebSocket(url, {
      headers: key === undefined ? {} : { authorization: `Bearer ${key}` },
      maxPayload: options.maxPayload ?? 64 * 1024 * 1024,
    });
    return new Promise((resolve, reject) => {
      socket.once('open', () => {
        resolve(new TestWorker(socket));
      });
      socket.once('unexpected-response', (_req, res) => {
        reject(new UpgradeRefused(res.statusCode ?? 0));
        socket.terminate();
      });
      socket.once('error', reject);
    });
  }

  /** Open (or resume) a session; `capacity` defaults high: these tests hold many grants per worker. */
  async hello(workerId: string, incarnation: string, resumeSessionId?: string, capacity = 1_000): Promise<Welcome> {
    const reply = await this.request({
      type: 'hello',
      protocolVersion: PROTOCOL_VERSION,
      workerId,
      incarnation,
      capacity,
      ...(resumeSessionId === undefined ? {} : { resumeSessionId }),
    });
    if (reply.type !== 'welcome') throw new Error(`hello answered with ${JSON.stringify(reply)}`);
    this.welcome = reply;
    return reply;
  }

  get sessionId(): string {
    if (this.welcome === undefined) throw new Error('no session');
    return this.welcome.sessionId;
  }

  sendRaw(data: string | Buffer): void {
    this.socket.send(data);
  }

  /** Send a frame with a fresh `id` and wait for the reply that names it. */
  request(frame: Record<string, unknown>, timeoutMs = 10_000): Promise<CoordinatorMessage> {
    const id = typeof frame.id === 'string' ? frame.id : newId();
    const reply = this.next((m) => 'inReplyTo' in m && m.inReplyTo === id, timeoutMs);
    this.socket.send(JSON.stringify({ ...frame, id }));
    return reply;
  }

  heartbeat(): Promise<CoordinatorMessage> {
    return this.request({ type: 'heartbeat', sessionId: this.sessionId });
  }

  acquire(requestId: string, taskId?: string): Promise<CoordinatorMessage> {
    return this.request({ type: 'lease.acquire', requestId, ...(taskId === undefined ? {} : { taskId }) });
  }

  renew(resource: string, token: string, incarnation = this.welcome?.incarnation): Promise<CoordinatorMessage> {
    return this.request({ type: 'lease.renew', resource, token, incarnation });
  }

  /** `task.complete` of grant `g`; `extra` adds fields (e.g. a carried acquire, `next`). */
  complete(
    g: { taskId: string; resource: string; token: string },
    resultId: string,
    extra: Record<string, unknown> = {},
  ): Promise<CoordinatorMessage> {
    return this.request({
      type: 'task.complete',
      taskId: g.taskId,
      resultId,
      resource: g.resource,
      token: g.token,
      incarnation: this.welcome?.incarnation,
      ...extra,
    });
  }

  release(resource: string, token: string): Promise<CoordinatorMessage> {
    return this.request({ type: 'lease.release', resource, token, incarnation: this.welcome?.incarnation });
  }

  /** The next message (already received or future) matching `match`. */
  next(match: (m: CoordinatorMessage) => boolean, timeoutMs = 10_000): Promise<CoordinatorMessage> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`no matching message within ${timeoutMs} ms; got ${JSON.stringify(this.received)}`));
      }, timeoutMs);
      this.#waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(timer);
          resolve(m);
        },
      });
    });
  }

  /** A push of `type` received at any time (past or future). */
  push<T extends CoordinatorMessage['type']>(
    type: T,
    timeoutMs = 10_000,
  ): Promise<Extract<CoordinatorMessage, { type: T }>> {
    const seen = this.received.find((m) => m.type === type);
    const found = seen ?? this.next((m) => m.type === type, timeoutMs);
    return Promise.resolve(found) as Promise<Extract<CoordinatorMessage, { type: T }>>;
  }

  close(): void {
    this.socket.close(1000, 'test done');
  }

  terminate(): void {
    this.socket.terminate();
  }
}

export class UpgradeRefused extends Error {
  readonly status: number;

  constructor(status: number) {
    super(`upgrade refused with HTTP ${status}`);
    this.status = status;
  }
}

/** Every key under `prefix` with its mod_revision: equal snapshots mean nothing changed. */
export async function etcdSnapshot(endpoints: readonly string[], prefix: string): Promise<Record<string, string>> {
  const client = new Etcd3({ hosts: [...endpoints] });
  try {
    const kvs = await client.getAll().prefix(prefix).exec();
    return Object.fromEntries(kvs.kvs.map((kv) => [kv.key.toString(), kv.mod_revision]));
  } finally {
    client.close();
  }
}

/**
 * The coordinators that serve a session under `prefix` (its `sessions/` records' `coordinatorId`),
 * as etcd has them now: the members a coordinator's peer table is built from (core/peers.ts).
 */
export async function sessionServers(endpoints: readonly string[], prefix: string): Promise<Set<string>> {
  const client = new Etcd3({ hosts: [...endpoints] });
  try {
    const records = await client.getAll().prefix(`${prefix}sessions/`).strings();
    return new Set(Object.values(records).map((text) => (JSON.parse(text) as { coordinatorId: string }).coordinatorId));
  } finally {
    client.close();
  }
}
