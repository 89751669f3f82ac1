/**
 * The worker's options, validated once: `compileOptions` returns a frozen, fully resolved set or
 * throws ONE ConfigError listing every problem (as `loadConfig` does for the daemons). Every
 * timeout and backoff is a named option with its default in {@link WORKER_DEFAULTS}.
 */
import {
  ConfigError,
  MAX_ACQUIRE_WAIT_MS,
  parseCapabilityPublicKeys,
  WorkerIdSchema,
  IncarnationSchema,
  DEFAULT_QUEUE,
  MAX_SESSION_QUEUES,
  QueueNameSchema,
  type BackoffOptions,
  type CapabilityPublicKey,
  type JsonValue,
} from '@leasehold/protocol';
import type { TlsClientOptions, WriteBatchingOptions } from '@leasehold/sink-client';
import type { Logger } from 'pino';
import type { CoordinatorTransport } from './connection.js';
import { isPayloadSchema, type PayloadSchema } from './core/payload-schema.js';
import type { SinkWriter, TaskHandler, WorkerCredentials, WriteHookInfo } from './types.js';

export interface ShutdownOptions {
  /** After `close()` (or a shutdown signal), how long in-flight handlers may run on. Default 10 s. */
  readonly graceMs?: number;
  /**
   * After the grace time their signals are aborted; how much longer to wait for handlers that
   * ignore it before their leases are released anyway and the worker closes. Default 5 s.
   */
  readonly forceMs?: number;
  /** Signals on which `run()` closes the worker (listeners removed on close). Default none. */
  readonly signals?: readonly NodeJS.Signals[];
}

export interface WorkerOptions<Payload = JsonValue, Result = JsonValue> {
  readonly coordinators: readonly string[];
  /**
   * The sink: its URL (the worker's own client; `writeBatching` as in `SinkClientOptions`: on by
   * default, the results of one turn leave as one `POST /v1/writes/batch`), or a writer of your own.
   */
  readonly sink:
    | { readonly url: string; readonly timeoutMs?: number; readonly writeBatching?: WriteBatchingOptions | false }
    | SinkWriter;
  readonly credentials: WorkerCredentials;
  /** TLS for https:// coordinators and sink: the CA to pin, and a client certificate (mTLS). */
  readonly tls?: TlsClientOptions;
  readonly handler: TaskHandler<Payload, Result>;
  /**
   * Validates each payload before the handler runs (zod, valibot, arktype or any Standard Schema);
   * a payload it refuses fails the task at once (non-retryable `InvalidPayloadError` naming the issues).
   */
  readonly payload?: PayloadSchema<Payload>;
  /** Required with `keyId`/`secret` or a certificate (the credential is bound to it); else generated. */
  readonly workerId?: string;
  readonly incarnation?: string;
  /**
   * The queues this worker serves: it is granted only tasks submitted to one of them (1 to
   * {@link MAX_SESSION_QUEUES} queue names; repeats count once). Default `['default']`, the queue
   * of tasks submitted without one.
   */
  readonly queues?: readonly string[];
  /** Tasks run at once; change it while running with `setConcurrency`. Default 1. */
  readonly concurrency?: number;
  /** The most `setConcurrency` may set (declared to the coordinator as the session's capacity). Default `concurrency`. */
  readonly maxConcurrency?: number;
  /** Default: warnings and errors as JSON lines on stderr. */
  readonly logger?: Logger;
  /**
   * The coordinators' capability public keys (`id:<key>,…` as in the sink's `CAPABILITY_PUBLIC_KEYS`,
   * or parsed): needed by `ctx.fencedTransaction`, which checks the grant's capability like the sink does.
   */
  readonly capabilityPublicKeys?: string | readonly CapabilityPublicKey[];
  readonly shutdown?: ShutdownOptions;
  /**
   * Long poll: how long the coordinator may hold a `lease.acquire` while nothing is grantable,
   * answering as soon as a task is (`waitMs`). 0 turns it off. Default 10 s from a coordinator that
   * takes `session.drain` (a closing worker's long polls then end at once), else 1 s (a close waits
   * for the long polls in flight to run out).
   */
  readonly acquireWaitMs?: number;
  /** After a `lease.none` that came at once (no long poll), wait at most this long (jittered). Default 500 ms. */
  readonly idleBackoffMs?: number;
  /** Deadline of one request to the coordinator. Default 5000 ms. */
  readonly requestTimeoutMs?: number;
  /** Deadline of opening a connection (TLS and upgrade). Default 3000 ms. */
  readonly connectTimeoutMs?: number;
  /** Between reconnects (full jitter). Default 100 ms doubling to 2000 ms. */
  readonly reconnectBackoff?: Pick<BackoffOptions, 'initialMs' | 'maxMs'>;
  /** Between retries of one acquire or one attempt report (full jitter). Default 50 ms doubling to 1000 ms. */
  readonly retryBackoff?: Pick<BackoffOptions, 'initialMs' | 'maxMs'>;
  /** How often an attempt's end (complete, fail, release) is sent before giving up. Default 5. */
  readonly reportAttempts?: number;
  /** After an unexpected failure of a slot's loop, wait this long before it goes on. Default 500 ms. */
  readonly slotErrorDelayMs?: number;
  /**
   * Called after the deadline check, immediately before a write is sent (or a fenced transaction
   * begins). Tests and the chaos runner use it to pause a worker where a real pause hurts most.
   */
  readonly beforeWrite?: (info: WriteHookInfo) => void | Promise<void>;
  /** How coordinators are reached (default: WebSocket). Tests replace it. */
  readonly transport?: CoordinatorTransport;
}

const DEFAULT_QUEUES: readonly string[] = Object.freeze([DEFAULT_QUEUE]);

/** Every default of {@link WorkerOptions}, in one place. */
export const WORKER_DEFAULTS = Object.freeze({
  queues: DEFAULT_QUEUES,
  concurrency: 1,
  sinkTimeoutMs: 5_000,
  shutdown: Object.freeze({ graceMs: 10_000, forceMs: 5_000, signals: Object.freeze([] as NodeJS.Signals[]) }),
  acquireWaitMs: 10_000,
  /** The default long poll against a coordinator that does not take `session.drain`. */
  acquireWaitMsWithoutDrain: 1_000,
  idleBackoffMs: 500,
  requestTimeoutMs: 5_000,
  connectTimeoutMs: 3_000,
  reconnectBackoff: Object.freeze({ initialMs: 100, maxMs: 2_000 }),
  retryBackoff: Object.freeze({ initialMs: 50, maxMs: 1_000 }),
  reportAttempts: 5,
  slotErrorDelayMs: 500,
});

/** The most tasks one worker may run at once (the protocol's bound on a hello's capacity). */
export const MAX_CONCURRENCY = 10_000;

/** Options resolved and checked; internal. */
export interface CompiledOptions<Payload, Result> {
  readonly coordinators: readonly string[];
  readonly sink: WorkerOptions<Payload, Result>['sink'];
  readonly credentialKey: string;
  readonly credentialKind: 'own' | 'certificate' | 'shared';
  readonly tls: TlsClientOptions | undefined;
  readonly handler: TaskHandler<Payload, Result>;
  readonly payload: PayloadSchema<Payload> | undefined;
  readonly workerId: string | undefined;
  readonly incarnation: string | undefined;
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly maxConcurrency: number;
  readonly logger: Logger | undefined;
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[] | undefined;
  readonly shutdown: {
    readonly graceMs: number;
    readonly forceMs: number;
    readonly signals: readonly NodeJS.Signals[];
  };
  /** As given; absent: the default, which depends on the coordinator ({@link acquireWaitMs}). */
  readonly acquireWaitMs: number | undefined;
  readonly idleBackoffMs: number;
  readonly requestTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly reconnectBackoff: BackoffOptions;
  readonly retryBackoff: BackoffOptions;
  readonly reportAttempts: number;
  readonly slotErrorDelayMs: number;
  readonly beforeWrite: WorkerOptions<Payload, Result>['beforeWrite'];
  readonly transport: CoordinatorTransport | undefined;
}

const DAY_MS = 86_400_000;

function checkMs(problems: string[], name: string, value: number | undefined, max = DAY_MS): void {
  if (value === undefined) return;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value > max)
    problems.push(`${name}: a number of milliseconds in 0..${max} (got ${String(value)})`);
}

function checkInt(problems: string[], name: string, value: number | undefined, min: number, max: number): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < min || value > max)
    problems.push(`${name}: an integer in ${min}..${max} (got ${String(value)})`);
}

function checkBackoff(problems: string[], name: string, value: WorkerOptions['retryBackoff']): void {
  if (value === undefined) return;
  checkMs(problems, `${name}.initialMs`, value.initialMs);
  checkMs(problems, `${name}.maxMs`, value.maxMs);
  if (value.initialMs > value.maxMs) problems.push(`${name}: initialMs must not exceed maxMs`);
}

function checkUrl(problems: string[], name: string, url: unknown, schemes: RegExp): void {
  if (typeof url !== 'string') {
    problems.push(`${name}: a URL (got ${typeof url})`);
    return;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    problems.push(`${name}: not a URL: ${JSON.stringify(url)}`);
    return;
  }
  if (!schemes.test(parsed.protocol)) problems.push(`${name}: ${parsed.protocol} is not one of ${schemes.source}`);
}

/** The queues option: 1 to MAX_SESSION_QUEUES valid names, repeats dropped (checked as data). */
function checkQueues(problems: string[], value: unknown): readonly string[] {
  if (value === undefined) return WORKER_DEFAULTS.queues;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SESSION_QUEUES) {
    problems.push(`queues: 1 to ${MAX_SESSION_QUEUES} queue names (got ${JSON.stringify(value)})`);
    return WORKER_DEFAULTS.queues;
  }
  const names: string[] = [];
  value.forEach((name: unknown, i) => {
    if (typeof name !== 'string' || !QueueNameSchema.safeParse(name).success)
      problems.push(`queues[${i}]: not a valid queue name: ${JSON.stringify(name)}`);
    else if (!names.includes(name)) names.push(name);
  });
  return Object.freeze(names);
}

/** The bearer key of the credentials (checked as data: JavaScript callers pass anything). */
function credentialOf(raw: unknown, problems: string[]): { key: string; kind: 'own' | 'certificate' | 'shared' } {
  const c = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  if ('keyId' in c) {
    const { keyId, secret } = c;
    if (typeof keyId !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(keyId))
      problems.push('credentials.keyId: 1-64 characters of [A-Za-z0-9_-]');
    if (typeof secret !== 'string' || secret.length < 16)
      problems.push('credentials.secret: at least 16 characters (is LEASEHOLD_WORKER_SECRET set?)');
    return { key: `${String(keyId)}:${String(secret)}`, kind: 'own' };
  }
  if ('workerKey' in c) {
    if (typeof c.workerKey !== 'string' || c.workerKey.length < 16)
      problems.push('credentials.workerKey: at least 16 characters');
    return { key: String(c.workerKey), kind: 'shared' };
  }
  if (c.certificate === true) return { key: '', kind: 'certificate' };
  problems.push(
    "credentials: { keyId, secret } (the worker's own), { certificate: true } (mTLS) or { workerKey } (insecure dev mode)",
  );
  return { key: '', kind: 'shared' };
}

/** Check every option; one ConfigError lists every problem. */
export function compileOptions<Payload, Result>(o: WorkerOptions<Payload, Result>): CompiledOptions<Payload, Result> {
  const problems: string[] = [];
  const coordinators: readonly unknown[] = Array.isArray(o.coordinators) ? (o.coordinators as unknown[]) : [];
  if (coordinators.length === 0) problems.push('coordinators: at least one coordinator URL');
  coordinators.forEach((url, i) => {
    // A transport of the caller's own (an in-process pair in tests) names coordinators its own way.
    checkUrl(
      problems,
      `coordinators[${i}]`,
      url,
      o.transport === undefined ? /^(https?|wss?):$/ : /^[a-z][a-z0-9+.-]*:$/,
    );
  });
  const sink = o.sink as WorkerOptions['sink'] | null | undefined;
  if (sink === undefined || sink === null) problems.push('sink: { url } or a SinkWriter');
  else if (!('write' in sink)) {
    checkUrl(problems, 'sink.url', sink.url, /^https?:$/);
    checkMs(problems, 'sink.timeoutMs', sink.timeoutMs);
  }
  const credential = credentialOf(o.credentials, problems);
  if (typeof (o.handler as unknown) !== 'function') problems.push('handler: a function (task, ctx) => result');
  if (o.payload !== undefined && !isPayloadSchema(o.payload))
    problems.push('payload: a Standard Schema (zod, valibot, arktype, ...): an object with `~standard.validate`');
  if (o.workerId !== undefined && !WorkerIdSchema.safeParse(o.workerId).success)
    problems.push(`workerId: not a valid id: ${JSON.stringify(o.workerId)}`);
  if (o.workerId === undefined && credential.kind !== 'shared')
    problems.push('workerId: required with a credential or a certificate (it is bound to one worker id)');
  if (o.incarnation !== undefined && !IncarnationSchema.safeParse(o.incarnation).success)
    problems.push(`incarnation: not a valid id: ${JSON.stringify(o.incarnation)}`);
  const queues = checkQueues(problems, o.queues);
  const concurrency = o.concurrency ?? WORKER_DEFAULTS.concurrency;
  const maxConcurrency = o.maxConcurrency ?? concurrency;
  checkInt(problems, 'concurrency', o.concurrency, 1, MAX_CONCURRENCY);
  checkInt(problems, 'maxConcurrency', o.maxConcurrency, 1, MAX_CONCURRENCY);
  if (Number.isInteger(concurrency) && Number.isInteger(maxConcurrency) && concurrency > maxConcurrency)
    problems.push(`concurrency (${concurrency}) must not exceed maxConcurrency (${maxConcurrency})`);
  let capabilityPublicKeys: readonly CapabilityPublicKey[] | undefined;
  if (typeof o.capabilityPublicKeys === 'string') {
    try {
      capabilityPublicKeys = parseCapabilityPublicKeys(o.capabilityPublicKeys);
      if (capabilityPublicKeys.length === 0) problems.push('capabilityPublicKeys: no key given');
    } catch (err) {
      problems.push(`capabilityPublicKeys: ${err instanceof Error ? err.message : String(err)}`);
    }
  } else capabilityPublicKeys = o.capabilityPublicKeys;
  const shutdown = { ...WORKER_DEFAULTS.shutdown, ...o.shutdown };
  checkMs(problems, 'shutdown.graceMs', o.shutdown?.graceMs);
  checkMs(problems, 'shutdown.forceMs', o.shutdown?.forceMs);
  if (
    !Array.isArray(shutdown.signals) ||
    shutdown.signals.some((s) => typeof s !== 'string' || !/^SIG[A-Z0-9]+$/.test(s))
  )
    problems.push('shutdown.signals: signal names such as SIGTERM and SIGINT');
  checkMs(problems, 'acquireWaitMs', o.acquireWaitMs, MAX_ACQUIRE_WAIT_MS);
  checkMs(problems, 'idleBackoffMs', o.idleBackoffMs);
  checkMs(problems, 'requestTimeoutMs', o.requestTimeoutMs);
  if (o.requestTimeoutMs === 0) problems.push('requestTimeoutMs: more than 0');
  checkMs(problems, 'connectTimeoutMs', o.connectTimeoutMs);
  checkBackoff(problems, 'reconnectBackoff', o.reconnectBackoff);
  checkBackoff(problems, 'retryBackoff', o.retryBackoff);
  checkInt(problems, 'reportAttempts', o.reportAttempts, 1, 1_000);
  checkMs(problems, 'slotErrorDelayMs', o.slotErrorDelayMs);
  if (o.beforeWrite !== undefined && typeof (o.beforeWrite as unknown) !== 'function')
    problems.push('beforeWrite: a function');
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze({
    coordinators: Object.freeze([...(coordinators as string[])]),
    sink: o.sink,
    credentialKey: credential.key,
    credentialKind: credential.kind,
    tls: o.tls,
    handler: o.handler,
    payload: o.payload,
    workerId: o.workerId,
    incarnation: o.incarnation,
    queues,
    concurrency,
    maxConcurrency,
    logger: o.logger,
    capabilityPublicKeys,
    shutdown: Object.freeze({ ...shutdown, signals: Object.freeze([...shutdown.signals]) }),
    acquireWaitMs: o.acquireWaitMs,
    idleBackoffMs: o.idleBackoffMs ?? WORKER_DEFAULTS.idleBackoffMs,
    requestTimeoutMs: o.requestTimeoutMs ?? WORKER_DEFAULTS.requestTimeoutMs,
    connectTimeoutMs: o.connectTimeoutMs ?? WORKER_DEFAULTS.connectTimeoutMs,
    reconnectBackoff: Object.freeze({ ...(o.reconnectBackoff ?? WORKER_DEFAULTS.reconnectBackoff) }),
    retryBackoff: Object.freeze({ ...(o.retryBackoff ?? WORKER_DEFAULTS.retryBackoff) }),
    reportAttempts: o.reportAttempts ?? WORKER_DEFAULTS.reportAttempts,
    slotErrorDelayMs: o.slotErrorDelayMs ?? WORKER_DEFAULTS.slotErrorDelayMs,
    beforeWrite: o.beforeWrite,
    transport: o.transport,
  });
}

/**
 * The long poll of the next acquire: the option when given; else 10 s when the serving coordinator
 * takes `session.drain` (`drains`), 1 s when not — so a close never waits 10 s on an older one.
 */
export function acquireWaitMs(option: number | undefined, drains: boolean): number {
  if (option !== undefined) return option;
  return drains ? WORKER_DEFAULTS.acquireWaitMs : WORKER_DEFAULTS.acquireWaitMsWithoutDrain;
}
