/**
 * Coordinator configuration: `loadConfig(env, argv, readFile)` is pure. Every option is declared
 * once in {@link OPTIONS}: environment variable `LEASEHOLD_COORDINATOR_<NAME>`, flag `--<name>`,
 * config-file key, default, help, and whether it is a secret (never a flag; `_FILE` allowed). The
 * result is frozen; every problem (not the first) is reported in one {@link ConfigError}.
 */
import {
  collectOptions,
  ConfigError,
  deepFreeze,
  DEFAULT_MAX_TASK_PAYLOAD_BYTES,
  DEFAULT_RETRY_POLICY,
  MAX_TASK_PAYLOAD_BYTES_LIMIT,
  formatHelp,
  MAX_ATTEMPTS_LIMIT,
  MAX_BACKOFF_MS,
  parseCapabilitySigningKey,
  resolveRetryPolicy,
  RetryPolicySchema,
  splitList,
  TRACING_OPTIONS,
  TRACING_RAW_SHAPE,
  tracingConfigOf,
  tracingProblems,
  wantsHelp,
  weakSecretProblem,
  WorkerIdSchema,
  type CapabilitySigningKey,
  type OptionTable,
  type RetryPolicy,
  type TracingConfig,
} from '@leasehold/protocol';
import { z } from 'zod';

export const ENV_PREFIX = 'LEASEHOLD_COORDINATOR_';

/** A worker's own credential: the key id and secret it presents, bound to one worker id. */
export interface WorkerCredential {
  readonly keyId: string;
  readonly workerId: string;
  readonly secret: string;
}

/** Server TLS: certificate and key files (PEM), and a CA whose client certificates are required. */
export interface TlsServerConfig {
  readonly certFile: string;
  readonly keyFile: string;
  /** Workers must present a certificate issued by this CA; its subject CN is the worker id. */
  readonly clientCaFile: string | undefined;
}

/** How long ended tasks of one state stay in etcd: by age and by count (null: no such limit). */
export interface RetentionRule {
  /** Removed this long after they ended (ms). */
  readonly maxAgeMs: number | null;
  /** Only the newest this many are kept (tasks with their own rule for the state are not counted). */
  readonly maxCount: number | null;
}

/** Retention of ended tasks (on by default): see service/retention.ts and docs/operations.md. */
export interface RetentionConfig {
  readonly enabled: boolean;
  readonly completed: RetentionRule;
  readonly failed: RetentionRule;
  readonly cancelled: RetentionRule;
  /** Payload bytes all kept ended tasks may hold together; past it the oldest go first (null: no cap). */
  readonly maxBytes: number | null;
  /** The count limits never remove a task that ended less than this long ago (ms). */
  readonly minAgeMs: number;
  /** A sweep every this many ms (on every coordinator; one at a time sweeps). */
  readonly intervalMs: number;
  /** At most this many removals per sweep (the next sweep goes on). */
  readonly batch: number;
}

export interface CoordinatorConfig {
  /** Unique per process; generated when not set. */
  readonly coordinatorId: string | undefined;
  readonly etcd: {
    readonly endpoints: readonly string[];
    /** Key prefix, always ending in `/`. */
    readonly prefix: string;
    readonly requestTimeoutMs: number;
    /** CA to verify etcd's certificate (https:// endpoints), and a client certificate for etcd's client-cert auth. */
    readonly caFile: string | undefined;
    readonly certFile: string | undefined;
    readonly keyFile: string | undefined;
    /** etcd user (etcd auth enabled): the role should be limited to the prefix. */
    readonly username: string | undefined;
    readonly password: string | undefined;
    /** gRPC receive limit: the largest reply from etcd accepted. */
    readonly maxResponseBytes: number;
    /** Bytes one range page may carry (every read pages by it). */
    readonly pageBytes: number;
    /** etcd's --quota-backend-bytes (etcd 3.4 does not report it): the quota metrics divide by it. */
    readonly quotaBytes: number;
    /** How often the db size is read for the metrics (Maintenance.Status). */
    readonly statusIntervalMs: number;
  };
  /** Largest task payload (its JSON, bytes) accepted at submit; more: 413 PAYLOAD_TOO_LARGE. */
  readonly maxTaskPayloadBytes: number;
  readonly retention: RetentionConfig;
  readonly http: {
    readonly host: string;
    readonly port: number;
    /** Write the bound port here once listening (for tests and supervisors). */
    readonly portFile: string | undefined;
    readonly maxPayloadBytes: number;
    /** HTTPS / WSS; undefined = plaintext (loopback only, unless insecurePlaintext). */
    readonly tls: TlsServerConfig | undefined;
    readonly insecurePlaintext: boolean;
  };
  readonly sink: {
    readonly url: string;
    readonly key: string;
    readonly timeoutMs: number;
    /** CA that issued the sink's certificate (pinned: nothing else is trusted). */
    readonly caFile: string | undefined;
  };
  /**
   * The Ed25519 key that signs write capabilities. Only coordinators hold it: sinks and fence-pg
   * verify with its public key (`publicKeyText`), so no verifier can make a capability.
   */
  readonly capabilitySigningKey: CapabilitySigningKey;
  /** Per-worker credentials (the secure mode): each binds a key id and secret to one worker id. */
  readonly workerCredentials: readonly WorkerCredential[];
  /** INSECURE dev mode: shared bearer keys; the worker id is whatever the worker claims. */
  readonly sharedWorkerKeys: readonly string[];
  readonly adminKeys: readonly string[];
  readonly sessionTtlMs: number;
  readonly heartbeatIntervalMs: number;
  /** The etcd lease behind a session lives this much longer than the session TTL. */
  readonly etcdLeaseMarginMs: number;
  /**
   * After this long without an answer from etcd, the coordinator stops serving its sessions: it
   * closes worker sockets with 1001 (they resume on a peer, which adopts their sessions) and
   * refuses hellos until etcd answers again.
   */
  readonly etcdGiveUpMs: number;
  /** Advance the sink fence to the deletion revision when an owner key disappears by expiry. */
  readonly fenceOnExpiry: boolean;
  /**
   * TEST ONLY. `grant-before-advance` sends each grant first and advances the fence a second
   * later, so the chaos checker can prove it detects the broken order; `ignore-retry-policy`
   * stores every submitted task with unlimited attempts and no backoff instead of its policy, so
   * the checker can prove it detects grants past the budget or before the backoff. Refused unless
   * LEASEHOLD_ALLOW_SABOTAGE=1.
   */
  readonly testSabotage: 'grant-before-advance' | 'ignore-retry-policy' | undefined;
  /** Refused frames tolerated on one socket before it is closed with 1008. */
  readonly maxBadFrames: number;
  /**
   * Sessions one worker identity may hold on this coordinator at once (a credential is bound to one
   * worker id, a certificate's CN is one; in the shared-key dev mode, per claimed worker id). A
   * hello past it gets LIMIT_REACHED. Resuming a session already served here takes none.
   */
  readonly maxSessionsPerWorker: number;
  /**
   * The web console's login, per client address (an IPv6 address by its /64): `freeAttempts` wrong
   * admin keys, then each wrong key locks the address for a backoff from `backoffMs` doubling to
   * `backoffMaxMs`. Per coordinator (not shared through etcd).
   */
  readonly consoleLogin: {
    readonly freeAttempts: number;
    readonly backoffMs: number;
    readonly backoffMaxMs: number;
  };
  /** Most acquires combined into one etcd transaction and one sink advance-batch. */
  readonly grantBatchMax: number;
  /** `lease.none.retryAfterMs`. */
  readonly noLeaseRetryAfterMs: number;
  /** Deepest JSON nesting accepted in a frame or body (payloads included). */
  readonly maxJsonDepth: number;
  /** The installation's retry policy: tasks submitted without their own get these values. */
  readonly retryPolicy: RetryPolicy;
  /**
   * How long a coordinator that did not serve a lost lease's session waits before it settles the
   * lost attempt itself (the serving coordinator does it at once; this covers its death).
   */
  readonly settleGraceMs: number;
  /** OpenTelemetry: off by default (main.ts loads the SDK only when on). */
  readonly tracing: TracingConfig;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Every option, by flag name. */
export const OPTIONS: OptionTable = Object.freeze({
  'coordinator-id': { env: 'COORDINATOR_ID', help: 'unique id of this coordinator (default: generated)' },
  'etcd-endpoints': { env: 'ETCD_ENDPOINTS', help: 'comma-separated etcd URLs', default: 'http://127.0.0.1:2379' },
  prefix: { env: 'PREFIX', help: 'etcd key prefix', default: 'leasehold/' },
  'etcd-timeout-ms': { env: 'ETCD_TIMEOUT_MS', help: 'deadline of each etcd request', default: '2000' },
  'etcd-ca': { env: 'ETCD_CA', help: "CA file (PEM) of etcd's certificate, for https:// endpoints" },
  'etcd-cert': { env: 'ETCD_CERT', help: "client certificate file (PEM) for etcd's client-cert auth" },
  'etcd-key': { env: 'ETCD_KEY', help: 'its private key file (PEM)' },
  'etcd-username': { env: 'ETCD_USERNAME', help: 'etcd user (etcd auth); give its role only the prefix' },
  'etcd-password': { env: 'ETCD_PASSWORD', help: 'password of the etcd user', secret: true },
  'etcd-max-response-bytes': {
    env: 'ETCD_MAX_RESPONSE_BYTES',
    help: 'largest etcd reply accepted (gRPC receive limit); reads page well under it',
    default: String(64 * 1024 * 1024),
  },
  'etcd-page-bytes': {
    env: 'ETCD_PAGE_BYTES',
    help: 'bytes one etcd range page may carry (snapshot, lists, console); at most a quarter of the above',
    default: String(16 * 1024 * 1024),
  },
  'etcd-quota-bytes': {
    env: 'ETCD_QUOTA_BYTES',
    help: "etcd's --quota-backend-bytes, for the quota metrics (etcd 3.4 does not report it)",
    default: String(2 * 1024 * 1024 * 1024),
  },
  'etcd-status-interval-ms': {
    env: 'ETCD_STATUS_INTERVAL_MS',
    help: 'how often the etcd db size is read for the metrics',
    default: '15000',
  },
  'max-task-payload-bytes': {
    env: 'MAX_TASK_PAYLOAD_BYTES',
    help: `largest task payload (its JSON, bytes) accepted at submit, at most ${MAX_TASK_PAYLOAD_BYTES_LIMIT}; pass large inputs by reference`,
    default: String(DEFAULT_MAX_TASK_PAYLOAD_BYTES),
  },
  retention: {
    env: 'RETENTION',
    help: 'remove ended tasks (record, payload, history) from etcd by age, count and bytes (the sink keeps what was written)',
    boolean: true,
    default: 'true',
  },
  'retention-completed-ms': {
    env: 'RETENTION_COMPLETED_MS',
    help: 'completed tasks are removed this long after they ended (off: never by age)',
    default: '3600000',
  },
  'retention-completed-count': {
    env: 'RETENTION_COMPLETED_COUNT',
    help: 'only the newest this many completed tasks are kept (off: no count limit)',
    default: '1000',
  },
  'retention-failed-ms': {
    env: 'RETENTION_FAILED_MS',
    help: 'failed tasks (dead letters) are removed this long after they ended (off: never by age)',
    default: '604800000',
  },
  'retention-failed-count': {
    env: 'RETENTION_FAILED_COUNT',
    help: 'only the newest this many failed tasks are kept (off: no count limit)',
    default: '10000',
  },
  'retention-cancelled-ms': {
    env: 'RETENTION_CANCELLED_MS',
    help: 'cancelled tasks are removed this long after they ended (off: never by age)',
    default: '3600000',
  },
  'retention-cancelled-count': {
    env: 'RETENTION_CANCELLED_COUNT',
    help: 'only the newest this many cancelled tasks are kept (off: no count limit)',
    default: '1000',
  },
  'retention-max-bytes': {
    env: 'RETENTION_MAX_BYTES',
    help: 'payload bytes all kept ended tasks may hold together; past it the oldest go first, own rules too (off: no cap)',
    default: String(256 * 1024 * 1024),
  },
  'retention-min-age-ms': {
    env: 'RETENTION_MIN_AGE_MS',
    help: 'the count limits never remove a task that ended less than this long ago',
    default: '60000',
  },
  'retention-interval-ms': {
    env: 'RETENTION_INTERVAL_MS',
    help: 'a retention sweep every this many ms',
    default: '10000',
  },
  'retention-batch': { env: 'RETENTION_BATCH', help: 'most tasks one sweep removes', default: '5000' },
  host: { env: 'HOST', help: 'listen address', default: '127.0.0.1' },
  port: { env: 'PORT', help: 'listen port, 0 = any free port', default: '7500' },
  'port-file': { env: 'PORT_FILE', help: 'write the bound port to this file once listening' },
  'tls-cert': { env: 'TLS_CERT', help: 'serve HTTPS / WSS with this certificate file (PEM); reloaded on SIGHUP' },
  'tls-key': { env: 'TLS_KEY', help: 'its private key file (PEM)' },
  'tls-client-ca': { env: 'TLS_CLIENT_CA', help: 'require worker client certificates from this CA (CN = worker id)' },
  'insecure-plaintext': {
    env: 'INSECURE_PLAINTEXT',
    help: 'serve plain HTTP on a non-loopback address (keys cross the network in clear)',
    boolean: true,
    default: 'false',
  },
  'max-payload-bytes': { env: 'MAX_PAYLOAD_BYTES', help: 'largest WebSocket frame / HTTP body', default: '1048576' },
  'max-json-depth': {
    env: 'MAX_JSON_DEPTH',
    help: 'deepest JSON nesting accepted in frames and bodies',
    default: '64',
  },
  'sink-url': { env: 'SINK_URL', help: 'base URL of the sink (required)' },
  'sink-key': { env: 'SINK_KEY', help: 'coordinator bearer key at the sink (required)', secret: true },
  'sink-ca': { env: 'SINK_CA', help: "CA file (PEM) that issued the sink's certificate (pinned)" },
  'sink-timeout-ms': { env: 'SINK_TIMEOUT_MS', help: 'deadline of each sink request', default: '2000' },
  'capability-signing-key': {
    env: 'CAPABILITY_SIGNING_KEY',
    help: 'id:<base64url Ed25519 seed> that signs write capabilities (required); sinks get its public key (--check-config prints it)',
    secret: true,
  },
  'capability-keys': {
    env: 'CAPABILITY_KEYS',
    help: 'REMOVED in 0.2 (shared HMAC secrets): use capability-signing-key',
    secret: true,
  },
  'worker-credentials': {
    env: 'WORKER_CREDENTIALS',
    help: 'per-worker credentials keyId:workerId:secret, comma- or line-separated',
    secret: true,
  },
  'worker-keys': {
    env: 'WORKER_KEYS',
    help: 'INSECURE dev mode: shared worker bearer keys (any holder may claim any worker id)',
    secret: true,
  },
  'admin-keys': { env: 'ADMIN_KEYS', help: 'comma-separated admin bearer keys (required)', secret: true },
  'session-ttl-ms': { env: 'SESSION_TTL_MS', help: 'session TTL judged by the coordinator', default: '10000' },
  'heartbeat-interval-ms': { env: 'HEARTBEAT_INTERVAL_MS', help: 'heartbeat interval told to workers (<= TTL/3)' },
  'etcd-lease-margin-ms': {
    env: 'ETCD_LEASE_MARGIN_MS',
    help: 'etcd lease TTL = session TTL + this (default: max(session TTL, 10 s)); an etcd stall shorter than the margin ends no healthy session',
  },
  'etcd-give-up-ms': {
    env: 'ETCD_GIVE_UP_MS',
    help: 'without an etcd answer this long, close worker sockets so they resume on a peer (default: session TTL / 2)',
  },
  'fence-on-expiry': {
    env: 'FENCE_ON_EXPIRY',
    help: 'advance fences when a holder expires',
    boolean: true,
    default: 'false',
  },
  'max-bad-frames': { env: 'MAX_BAD_FRAMES', help: 'bad frames before a socket is closed with 1008', default: '10' },
  'max-sessions-per-worker': {
    env: 'MAX_SESSIONS_PER_WORKER',
    help: 'sessions one worker identity (credential, certificate) may hold on this coordinator; more: LIMIT_REACHED',
    default: '8',
  },
  'console-login-attempts': {
    env: 'CONSOLE_LOGIN_ATTEMPTS',
    help: 'wrong console admin keys per client address (IPv6: per /64) before its logins back off',
    default: '5',
  },
  'console-login-backoff-ms': {
    env: 'CONSOLE_LOGIN_BACKOFF_MS',
    help: 'console login lock after the free attempts; doubles with each further wrong key',
    default: '1000',
  },
  'console-login-backoff-max-ms': {
    env: 'CONSOLE_LOGIN_BACKOFF_MAX_MS',
    help: 'longest console login lock; failures are forgotten this long after the last lock ends',
    default: '300000',
  },
  'grant-batch-max': { env: 'GRANT_BATCH_MAX', help: 'most grants per etcd txn / sink batch', default: '64' },
  'no-lease-retry-after-ms': { env: 'NO_LEASE_RETRY_AFTER_MS', help: 'retryAfterMs in lease.none', default: '500' },
  'retry-max-attempts': {
    env: 'RETRY_MAX_ATTEMPTS',
    help: 'default grants per task before it fails (lease expiries count)',
    default: String(DEFAULT_RETRY_POLICY.maxAttempts),
  },
  'retry-initial-ms': {
    env: 'RETRY_INITIAL_MS',
    help: 'default backoff after the first failed attempt',
    default: String(DEFAULT_RETRY_POLICY.backoff.initialMs),
  },
  'retry-multiplier': {
    env: 'RETRY_MULTIPLIER',
    help: 'default backoff growth per failed attempt',
    default: String(DEFAULT_RETRY_POLICY.backoff.multiplier),
  },
  'retry-max-ms': {
    env: 'RETRY_MAX_MS',
    help: 'default cap of one backoff',
    default: String(DEFAULT_RETRY_POLICY.backoff.maxMs),
  },
  'retry-jitter': {
    env: 'RETRY_JITTER',
    help: 'default backoff jitter, 0..1 (a delay d is drawn from [d(1-jitter), d])',
    default: String(DEFAULT_RETRY_POLICY.backoff.jitter),
  },
  'retry-non-retryable': {
    env: 'RETRY_NON_RETRYABLE',
    help: 'default comma-separated error names that fail a task at once',
  },
  'settle-grace-ms': {
    env: 'SETTLE_GRACE_MS',
    help: "wait before settling a lost attempt of a peer's session (0: at once; each coordinator tries, one lands)",
    default: '0',
  },
  ...TRACING_OPTIONS,
  'log-level': { env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent', default: 'info' },
  'test-sabotage': {
    env: 'TEST_SABOTAGE',
    help: 'TEST ONLY: grant-before-advance or ignore-retry-policy (needs LEASEHOLD_ALLOW_SABOTAGE=1)',
  },
});

export const HELP_TEXT = formatHelp(
  'leasehold-coordinator: etcd sessions and leases, revision tokens, the fence advanced before every grant.',
  'leasehold-coordinator',
  OPTIONS,
  ENV_PREFIX,
);

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, 'must be a non-negative decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((s) => s === 'true' || s === '1' || s === 'yes');
/** An integer limit, or `off` (no such limit: null). */
const limit = (min: number, max: number) => z.union([z.literal('off').transform(() => null), int(min, max)]);
const secretList = (required: boolean) =>
  z
    .string()
    .transform(splitList)
    .pipe(
      z
        .array(
          z.string().superRefine((key, ctx) => {
            const problem = weakSecretProblem(key);
            if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `a key ${problem}` });
          }),
        )
        .min(required ? 1 : 0, 'at least one key'),
    );
const KEY_ID = /^[A-Za-z0-9_-]{1,64}$/;
const credentials = z.string().transform((text, ctx): WorkerCredential[] => {
  const out: WorkerCredential[] = [];
  for (const entry of splitList(text)) {
    const [keyId, workerId, ...rest] = entry.split(':');
    const secret = rest.join(':');
    if (keyId === undefined || workerId === undefined || rest.length === 0 || !KEY_ID.test(keyId)) {
      ctx.addIssue({ code: 'custom', message: 'each credential is keyId:workerId:secret (keyId of [A-Za-z0-9_-])' });
      continue;
    }
    if (!WorkerIdSchema.safeParse(workerId).success) {
      ctx.addIssue({ code: 'custom', message: `credential ${keyId}: ${JSON.stringify(workerId)} is not a worker id` });
      continue;
    }
    const problem = weakSecretProblem(secret);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `credential ${keyId}: the secret ${problem}` });
    out.push({ keyId, workerId, secret });
  }
  if (new Set(out.map((c) => c.keyId)).size !== out.length) {
    ctx.addIssue({ code: 'custom', message: 'credential key ids must be unique' });
  }
  return out;
});

const RawSchema = z.object({
  COORDINATOR_ID: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,64}$/)
    .optional(),
  ETCD_ENDPOINTS: z
    .string()
    .transform(splitList)
    .pipe(z.array(z.url({ protocol: /^https?$/ })).min(1, 'at least one endpoint')),
  PREFIX: z
    .string()
    .refine((s) => /^[\x21-\x7e]+$/.test(s), 'must be printable ASCII without spaces')
    .transform((s) => (s.endsWith('/') ? s : `${s}/`)),
  ETCD_TIMEOUT_MS: int(50, 60_000),
  ETCD_CA: z.string().min(1).optional(),
  ETCD_CERT: z.string().min(1).optional(),
  ETCD_KEY: z.string().min(1).optional(),
  ETCD_USERNAME: z.string().min(1).optional(),
  ETCD_PASSWORD: z.string().min(1).optional(),
  ETCD_MAX_RESPONSE_BYTES: int(4 * 1024 * 1024, 1024 * 1024 * 1024),
  ETCD_PAGE_BYTES: int(256 * 1024, 256 * 1024 * 1024),
  ETCD_QUOTA_BYTES: int(1024 * 1024, 64 * 1024 * 1024 * 1024),
  ETCD_STATUS_INTERVAL_MS: int(100, 3_600_000),
  MAX_TASK_PAYLOAD_BYTES: int(16, MAX_TASK_PAYLOAD_BYTES_LIMIT),
  RETENTION: bool,
  RETENTION_COMPLETED_MS: limit(0, 10 * 366 * 86_400_000),
  RETENTION_COMPLETED_COUNT: limit(0, 100_000_000),
  RETENTION_FAILED_MS: limit(0, 10 * 366 * 86_400_000),
  RETENTION_FAILED_COUNT: limit(0, 100_000_000),
  RETENTION_CANCELLED_MS: limit(0, 10 * 366 * 86_400_000),
  RETENTION_CANCELLED_COUNT: limit(0, 100_000_000),
  RETENTION_MAX_BYTES: limit(0, Number.MAX_SAFE_INTEGER),
  RETENTION_MIN_AGE_MS: int(0, 86_400_000),
  RETENTION_INTERVAL_MS: int(100, 3_600_000),
  RETENTION_BATCH: int(1, 1_000_000),
  HOST: z.string().min(1),
  PORT: int(0, 65_535),
  PORT_FILE: z.string().min(1).optional(),
  TLS_CERT: z.string().min(1).optional(),
  TLS_KEY: z.string().min(1).optional(),
  TLS_CLIENT_CA: z.string().min(1).optional(),
  INSECURE_PLAINTEXT: bool,
  MAX_PAYLOAD_BYTES: int(256, 64 * 1024 * 1024),
  MAX_JSON_DEPTH: int(2, 1_000),
  SINK_URL: z.url({ protocol: /^https?$/ }),
  SINK_KEY: z.string().superRefine((key, ctx) => {
    const problem = weakSecretProblem(key);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  }),
  SINK_CA: z.string().min(1).optional(),
  SINK_TIMEOUT_MS: int(50, 60_000),
  CAPABILITY_SIGNING_KEY: z.string().transform((text, ctx) => {
    try {
      const key = parseCapabilitySigningKey(text);
      const problem = weakSecretProblem(text.slice(text.indexOf(':') + 1).trim());
      if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `the seed ${problem}` });
      return key;
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  }),
  CAPABILITY_KEYS: z
    .string()
    .optional()
    .refine((v) => v === undefined, {
      error:
        'shared HMAC capability keys are gone (every verifier could sign with them): set CAPABILITY_SIGNING_KEY ' +
        '(an Ed25519 seed) and give the sinks its public key as CAPABILITY_PUBLIC_KEYS (docs/security.md, Capabilities)',
    }),
  WORKER_CREDENTIALS: credentials.optional(),
  WORKER_KEYS: secretList(false).optional(),
  ADMIN_KEYS: secretList(true),
  SESSION_TTL_MS: int(300, 3_600_000),
  HEARTBEAT_INTERVAL_MS: int(10, 1_200_000).optional(),
  ETCD_LEASE_MARGIN_MS: int(1_000, 3_600_000).optional(),
  ETCD_GIVE_UP_MS: int(100, 3_600_000).optional(),
  FENCE_ON_EXPIRY: bool,
  MAX_BAD_FRAMES: int(1, 10_000),
  MAX_SESSIONS_PER_WORKER: int(1, 100_000),
  CONSOLE_LOGIN_ATTEMPTS: int(1, 1_000),
  CONSOLE_LOGIN_BACKOFF_MS: int(1, 3_600_000),
  CONSOLE_LOGIN_BACKOFF_MAX_MS: int(1, 86_400_000),
  GRANT_BATCH_MAX: int(1, 1_000),
  NO_LEASE_RETRY_AFTER_MS: int(0, 600_000),
  RETRY_MAX_ATTEMPTS: int(1, MAX_ATTEMPTS_LIMIT),
  RETRY_INITIAL_MS: int(0, MAX_BACKOFF_MS),
  RETRY_MULTIPLIER: z
    .string()
    .regex(/^[0-9]+(\.[0-9]+)?$/, 'must be a decimal number')
    .transform(Number)
    .pipe(z.number().min(1).max(100)),
  RETRY_MAX_MS: int(0, MAX_BACKOFF_MS),
  RETRY_JITTER: z
    .string()
    .regex(/^[0-9]+(\.[0-9]+)?$/, 'must be a decimal number')
    .transform(Number)
    .pipe(z.number().min(0).max(1)),
  RETRY_NON_RETRYABLE: z.string().transform(splitList).pipe(RetryPolicySchema.shape.nonRetryable).optional(),
  SETTLE_GRACE_MS: int(0, 600_000),
  ...TRACING_RAW_SHAPE,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  TEST_SABOTAGE: z.enum(['grant-before-advance', 'ignore-retry-policy']).optional(),
});

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/** Cross-field rules, checked on the raw values so they are reported even when other fields fail. */
function crossFieldProblems(raw: Readonly<Record<string, string>>): string[] {
  const problems: string[] = [];
  const ttl = Number(raw.SESSION_TTL_MS ?? '10000');
  const heartbeat = raw.HEARTBEAT_INTERVAL_MS === undefined ? undefined : Number(raw.HEARTBEAT_INTERVAL_MS);
  if (heartbeat !== undefined && Number.isFinite(heartbeat) && Number.isFinite(ttl) && heartbeat * 3 > ttl) {
    problems.push(`${ENV_PREFIX}HEARTBEAT_INTERVAL_MS: must be <= SESSION_TTL_MS / 3 (${Math.floor(ttl / 3)})`);
  }
  const margin = raw.ETCD_LEASE_MARGIN_MS === undefined ? Math.max(ttl, 10_000) : Number(raw.ETCD_LEASE_MARGIN_MS);
  const giveUp = raw.ETCD_GIVE_UP_MS === undefined ? Math.floor(ttl / 2) : Number(raw.ETCD_GIVE_UP_MS);
  if (Number.isFinite(margin) && Number.isFinite(giveUp) && giveUp >= ttl + margin - 1_000) {
    problems.push(
      `${ENV_PREFIX}ETCD_GIVE_UP_MS: must be well below the etcd lease TTL (SESSION_TTL_MS + ETCD_LEASE_MARGIN_MS = ${ttl + margin} ms), ` +
        'or workers cannot move to a peer before their sessions end',
    );
  }
  const loginBackoff = Number(raw.CONSOLE_LOGIN_BACKOFF_MS ?? '1000');
  const loginBackoffMax = Number(raw.CONSOLE_LOGIN_BACKOFF_MAX_MS ?? '300000');
  if (Number.isFinite(loginBackoff) && Number.isFinite(loginBackoffMax) && loginBackoffMax < loginBackoff) {
    problems.push(`${ENV_PREFIX}CONSOLE_LOGIN_BACKOFF_MAX_MS: must be >= CONSOLE_LOGIN_BACKOFF_MS (${loginBackoff})`);
  }
  if ((raw.TLS_CERT === undefined) !== (raw.TLS_KEY === undefined)) {
    problems.push(`${ENV_PREFIX}TLS_CERT / TLS_KEY: give both or neither`);
  }
  if (raw.TLS_CLIENT_CA !== undefined && raw.TLS_CERT === undefined) {
    problems.push(`${ENV_PREFIX}TLS_CLIENT_CA: needs TLS_CERT and TLS_KEY (client certificates need TLS)`);
  }
  if ((raw.ETCD_CERT === undefined) !== (raw.ETCD_KEY === undefined)) {
    problems.push(`${ENV_PREFIX}ETCD_CERT / ETCD_KEY: give both or neither`);
  }
  const maxResponse = Number(raw.ETCD_MAX_RESPONSE_BYTES ?? String(64 * 1024 * 1024));
  const pageBytes = Number(raw.ETCD_PAGE_BYTES ?? String(16 * 1024 * 1024));
  if (Number.isFinite(maxResponse) && Number.isFinite(pageBytes) && pageBytes * 4 > maxResponse) {
    problems.push(
      `${ENV_PREFIX}ETCD_PAGE_BYTES: must be at most ETCD_MAX_RESPONSE_BYTES / 4 (${Math.floor(maxResponse / 4)}), ` +
        'so a page of records at their bound stays well under the receive limit',
    );
  }
  if ((raw.ETCD_USERNAME === undefined) !== (raw.ETCD_PASSWORD === undefined)) {
    problems.push(`${ENV_PREFIX}ETCD_USERNAME / ETCD_PASSWORD: give both or neither`);
  }
  const plaintextOk =
    raw.INSECURE_PLAINTEXT === 'true' || raw.INSECURE_PLAINTEXT === '1' || raw.INSECURE_PLAINTEXT === 'yes';
  if (raw.TLS_CERT === undefined && !LOOPBACK.test(raw.HOST ?? '127.0.0.1') && !plaintextOk) {
    problems.push(
      `${ENV_PREFIX}HOST: ${raw.HOST ?? ''} is not a loopback address: serve TLS (TLS_CERT, TLS_KEY) or set ` +
        `${ENV_PREFIX}INSECURE_PLAINTEXT=true to send keys in clear`,
    );
  }
  if (raw.WORKER_CREDENTIALS === undefined && raw.WORKER_KEYS === undefined && raw.TLS_CLIENT_CA === undefined) {
    problems.push(
      `${ENV_PREFIX}WORKER_CREDENTIALS: required (per-worker keyId:workerId:secret), or TLS_CLIENT_CA for worker ` +
        `certificates, or WORKER_KEYS for the insecure shared-key dev mode`,
    );
  }
  problems.push(...tracingProblems(raw, ENV_PREFIX));
  return problems;
}

export { wantsHelp };

/**
 * Resolve the configuration from the environment, the flags and an optional config file (see
 * `collectOptions` in @leasehold/protocol for precedence and `_FILE` secrets). Pure: reading files
 * is `input.readFile`. Returns a frozen config or throws one ConfigError listing every problem.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[] = [],
  readFile?: (path: string) => string,
): CoordinatorConfig {
  const { raw, problems, origin } = collectOptions(OPTIONS, ENV_PREFIX, {
    env,
    argv,
    ...(readFile === undefined ? {} : { readFile }),
  });
  if (raw.TEST_SABOTAGE !== undefined && env.LEASEHOLD_ALLOW_SABOTAGE !== '1') {
    problems.push(`${ENV_PREFIX}TEST_SABOTAGE: a test-only switch; also set LEASEHOLD_ALLOW_SABOTAGE=1 to use it`);
  }
  const parsed = RawSchema.safeParse(raw);
  problems.push(...crossFieldProblems(raw));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? '');
      problems.push(`${origin[key] ?? `${ENV_PREFIX}${key}`}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  const c = parsed.data;
  const config: CoordinatorConfig = {
    coordinatorId: c.COORDINATOR_ID,
    etcd: {
      endpoints: Object.freeze(c.ETCD_ENDPOINTS),
      prefix: c.PREFIX,
      requestTimeoutMs: c.ETCD_TIMEOUT_MS,
      caFile: c.ETCD_CA,
      certFile: c.ETCD_CERT,
      keyFile: c.ETCD_KEY,
      username: c.ETCD_USERNAME,
      password: c.ETCD_PASSWORD,
      maxResponseBytes: c.ETCD_MAX_RESPONSE_BYTES,
      pageBytes: c.ETCD_PAGE_BYTES,
      quotaBytes: c.ETCD_QUOTA_BYTES,
      statusIntervalMs: c.ETCD_STATUS_INTERVAL_MS,
    },
    maxTaskPayloadBytes: c.MAX_TASK_PAYLOAD_BYTES,
    retention: {
      enabled: c.RETENTION,
      completed: { maxAgeMs: c.RETENTION_COMPLETED_MS, maxCount: c.RETENTION_COMPLETED_COUNT },
      failed: { maxAgeMs: c.RETENTION_FAILED_MS, maxCount: c.RETENTION_FAILED_COUNT },
      cancelled: { maxAgeMs: c.RETENTION_CANCELLED_MS, maxCount: c.RETENTION_CANCELLED_COUNT },
      maxBytes: c.RETENTION_MAX_BYTES,
      minAgeMs: c.RETENTION_MIN_AGE_MS,
      intervalMs: c.RETENTION_INTERVAL_MS,
      batch: c.RETENTION_BATCH,
    },
    http: {
      host: c.HOST,
      port: c.PORT,
      portFile: c.PORT_FILE,
      maxPayloadBytes: c.MAX_PAYLOAD_BYTES,
      tls:
        c.TLS_CERT === undefined || c.TLS_KEY === undefined
          ? undefined
          : { certFile: c.TLS_CERT, keyFile: c.TLS_KEY, clientCaFile: c.TLS_CLIENT_CA },
      insecurePlaintext: c.INSECURE_PLAINTEXT,
    },
    sink: { url: c.SINK_URL.replace(/\/+$/, ''), key: c.SINK_KEY, timeoutMs: c.SINK_TIMEOUT_MS, caFile: c.SINK_CA },
    capabilitySigningKey: c.CAPABILITY_SIGNING_KEY,
    workerCredentials: Object.freeze(c.WORKER_CREDENTIALS ?? []),
    sharedWorkerKeys: Object.freeze(c.WORKER_KEYS ?? []),
    adminKeys: Object.freeze(c.ADMIN_KEYS),
    sessionTtlMs: c.SESSION_TTL_MS,
    heartbeatIntervalMs: c.HEARTBEAT_INTERVAL_MS ?? Math.max(10, Math.floor(c.SESSION_TTL_MS / 4)),
    etcdLeaseMarginMs: c.ETCD_LEASE_MARGIN_MS ?? Math.max(c.SESSION_TTL_MS, 10_000),
    etcdGiveUpMs: c.ETCD_GIVE_UP_MS ?? Math.max(100, Math.floor(c.SESSION_TTL_MS / 2)),
    fenceOnExpiry: c.FENCE_ON_EXPIRY,
    maxBadFrames: c.MAX_BAD_FRAMES,
    maxSessionsPerWorker: c.MAX_SESSIONS_PER_WORKER,
    consoleLogin: {
      freeAttempts: c.CONSOLE_LOGIN_ATTEMPTS,
      backoffMs: c.CONSOLE_LOGIN_BACKOFF_MS,
      backoffMaxMs: c.CONSOLE_LOGIN_BACKOFF_MAX_MS,
    },
    grantBatchMax: c.GRANT_BATCH_MAX,
    noLeaseRetryAfterMs: c.NO_LEASE_RETRY_AFTER_MS,
    maxJsonDepth: c.MAX_JSON_DEPTH,
    retryPolicy: resolveRetryPolicy(DEFAULT_RETRY_POLICY, {
      maxAttempts: c.RETRY_MAX_ATTEMPTS,
      backoff: {
        initialMs: c.RETRY_INITIAL_MS,
        multiplier: c.RETRY_MULTIPLIER,
        maxMs: c.RETRY_MAX_MS,
        jitter: c.RETRY_JITTER,
      },
      nonRetryable: c.RETRY_NON_RETRYABLE ?? [],
    }),
    settleGraceMs: c.SETTLE_GRACE_MS,
    tracing: tracingConfigOf(c),
    logLevel: c.LOG_LEVEL,
    testSabotage: c.TEST_SABOTAGE,
  };
  return deepFreeze(config);
}

/** The config with secrets replaced, for the one start-up log line. */
export function redactConfig(config: CoordinatorConfig): Record<string, unknown> {
  return {
    ...config,
    etcd: { ...config.etcd, password: config.etcd.password === undefined ? undefined : '[redacted]' },
    sink: { ...config.sink, key: '[redacted]' },
    capabilitySigningKey: {
      id: config.capabilitySigningKey.id,
      secret: '[redacted]',
      publicKey: config.capabilitySigningKey.publicKeyText,
    },
    workerCredentials: config.workerCredentials.map((w) => ({
      keyId: w.keyId,
      workerId: w.workerId,
      secret: '[redacted]',
    })),
    sharedWorkerKeys: `[${config.sharedWorkerKeys.length} redacted]`,
    adminKeys: `[${config.adminKeys.length} redacted]`,
  };
}
