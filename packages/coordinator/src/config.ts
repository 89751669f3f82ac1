/**
 * Coordinator configuration: `loadConfig(env, argv, readFile)` is pure. Every option is declared
 * once, in {@link FIELDS}, at the place its value takes in {@link CoordinatorConfig}: environment
 * variable `LEASEHOLD_COORDINATOR_<ENV>`, flag and config-file key `--<env-in-kebab-case>`,
 * default, help, whether it is a secret (never a flag; `_FILE` allowed), its parser and, where
 * the log shows it differently, its redacted view. The type, the option table, `--help`, the
 * defaults and the redaction are derived from that (`defineConfig`, @leasehold/protocol); the
 * cross-field rules are {@link CHECKS}. The result is frozen; every problem (not the first) is
 * reported in one ConfigError.
 */
import {
  check,
  DEFAULT_MAX_TASK_PAYLOAD_BYTES,
  DEFAULT_RETRY_POLICY,
  defineConfig,
  derived,
  formatHelp,
  MAX_ATTEMPTS_LIMIT,
  MAX_BACKOFF_MS,
  MAX_TASK_PAYLOAD_BYTES_LIMIT,
  option,
  parseCapabilitySigningKey,
  resolveRetryPolicy,
  RetryPolicySchema,
  splitList,
  TRACING,
  wantsHelp,
  weakSecretProblem,
  WorkerIdSchema,
  type OptionTable,
  type ValueOf,
} from '@leasehold/protocol';
import {
  bool,
  decimal,
  httpUrl,
  int,
  keyList,
  limit,
  logLevelOption,
  maxJsonDepthOption,
  optionalText,
  removedCapabilityKeys,
  required,
  secretKey,
  serverOptions,
} from '@leasehold/daemon-kit';
import { refuseUnusableBaseUrl } from '@leasehold/sink-client';
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

const signingKey = z.string(required).transform((text, ctx) => {
  try {
    const key = parseCapabilitySigningKey(text);
    const problem = weakSecretProblem(text.slice(text.indexOf(':') + 1).trim());
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `the seed ${problem}` });
    return key;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return z.NEVER;
  }
});

/** The two retention options of one end state (`completed`, `failed`, `cancelled`). */
function retentionRule(state: string, what: string, defaults: { readonly ms: string; readonly count: string }) {
  const env = `RETENTION_${state.toUpperCase()}`;
  return {
    /** Removed this long after they ended (ms). */
    maxAgeMs: option({
      env: `${env}_MS`,
      help: `${what} are removed this long after they ended (off: never by age)`,
      default: defaults.ms,
      schema: limit(0, 10 * 366 * 86_400_000),
    }),
    /** Only the newest this many are kept (tasks with their own rule for the state are not counted). */
    maxCount: option({
      env: `${env}_COUNT`,
      help: `only the newest this many ${state} tasks are kept (off: no count limit)`,
      default: defaults.count,
      schema: limit(0, 100_000_000),
    }),
  };
}

const server = serverOptions({ defaultPort: '7500', serves: 'HTTPS / WSS' });

// Options several fields or checks read: declared once here, placed below.
const sessionTtlMs = option({
  env: 'SESSION_TTL_MS',
  help: 'session TTL judged by the coordinator',
  default: '10000',
  schema: int(300, 3_600_000),
});
const heartbeatIntervalMs = option({
  env: 'HEARTBEAT_INTERVAL_MS',
  help: 'heartbeat interval told to workers (<= TTL/3)',
  schema: int(10, 1_200_000).optional(),
});
const tlsClientCa = option({
  env: 'TLS_CLIENT_CA',
  help: 'require worker client certificates from this CA (CN = worker id)',
  schema: optionalText,
});
const etcdCert = option({
  env: 'ETCD_CERT',
  help: "client certificate file (PEM) for etcd's client-cert auth",
  schema: optionalText,
});
const etcdKey = option({ env: 'ETCD_KEY', help: 'its private key file (PEM)', schema: optionalText });
const etcdUsername = option({
  env: 'ETCD_USERNAME',
  help: 'etcd user (etcd auth); give its role only the prefix',
  schema: optionalText,
});
const etcdPassword = option({
  env: 'ETCD_PASSWORD',
  help: 'password of the etcd user',
  secret: true,
  schema: optionalText,
});
const etcdMaxResponseBytes = option({
  env: 'ETCD_MAX_RESPONSE_BYTES',
  help: 'largest etcd reply accepted (gRPC receive limit); reads page well under it',
  default: String(64 * 1024 * 1024),
  schema: int(4 * 1024 * 1024, 1024 * 1024 * 1024),
});
const etcdPageBytes = option({
  env: 'ETCD_PAGE_BYTES',
  help: 'bytes one etcd range page may carry (snapshot, lists, console); at most a quarter of the above',
  default: String(16 * 1024 * 1024),
  schema: int(256 * 1024, 256 * 1024 * 1024),
});
const workerCredentials = option({
  env: 'WORKER_CREDENTIALS',
  help: 'per-worker credentials keyId:workerId:secret, comma- or line-separated',
  secret: true,
  schema: credentials.optional(),
});
const workerKeys = option({
  env: 'WORKER_KEYS',
  help: 'INSECURE dev mode: shared worker bearer keys (any holder may claim any worker id)',
  secret: true,
  schema: keyList({ required: false }).optional(),
});
const consoleLoginBackoffMs = option({
  env: 'CONSOLE_LOGIN_BACKOFF_MS',
  help: 'console login lock after the free attempts; doubles with each further wrong key',
  default: '1000',
  schema: int(1, 3_600_000),
});
const consoleLoginBackoffMaxMs = option({
  env: 'CONSOLE_LOGIN_BACKOFF_MAX_MS',
  help: 'longest console login lock; failures are forgotten this long after the last lock ends',
  default: '300000',
  schema: int(1, 86_400_000),
});
/** The etcd lease behind a session lives this much longer than the session TTL. */
const etcdLeaseMarginMs = derived(
  {
    ttl: sessionTtlMs,
    margin: option({
      env: 'ETCD_LEASE_MARGIN_MS',
      help: 'etcd lease TTL = session TTL + this (default: max(session TTL, 10 s)); an etcd stall shorter than the margin ends no healthy session',
      schema: int(1_000, 3_600_000).optional(),
    }),
  },
  ({ ttl, margin }) => margin ?? Math.max(ttl, 10_000),
);
/**
 * After this long without an answer from etcd, the coordinator stops serving its sessions: it
 * closes worker sockets with 1001 (they resume on a peer, which adopts their sessions) and
 * refuses hellos until etcd answers again.
 */
const etcdGiveUpMs = derived(
  {
    ttl: sessionTtlMs,
    giveUp: option({
      env: 'ETCD_GIVE_UP_MS',
      help: 'without an etcd answer this long, close worker sockets so they resume on a peer (default: session TTL / 2)',
      schema: int(100, 3_600_000).optional(),
    }),
  },
  ({ ttl, giveUp }) => giveUp ?? Math.max(100, Math.floor(ttl / 2)),
);

const FIELDS = {
  /** Unique per process; generated when not set. */
  coordinatorId: option({
    env: 'COORDINATOR_ID',
    help: 'unique id of this coordinator (default: generated)',
    schema: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,64}$/)
      .optional(),
  }),
  etcd: {
    endpoints: option({
      env: 'ETCD_ENDPOINTS',
      help: 'comma-separated etcd URLs',
      default: 'http://127.0.0.1:2379',
      schema: z.string().transform(splitList).pipe(z.array(httpUrl).min(1, 'at least one endpoint')),
    }),
    /** Key prefix, always ending in `/`. */
    prefix: option({
      env: 'PREFIX',
      help: 'etcd key prefix',
      default: 'leasehold/',
      schema: z
        .string()
        .refine((s) => /^[\x21-\x7e]+$/.test(s), 'must be printable ASCII without spaces')
        .transform((s) => (s.endsWith('/') ? s : `${s}/`)),
    }),
    requestTimeoutMs: option({
      env: 'ETCD_TIMEOUT_MS',
      help: 'deadline of each etcd request',
      default: '2000',
      schema: int(50, 60_000),
    }),
    /** CA to verify etcd's certificate (https:// endpoints), and a client certificate for etcd's client-cert auth. */
    caFile: option({
      env: 'ETCD_CA',
      help: "CA file (PEM) of etcd's certificate, for https:// endpoints",
      schema: optionalText,
    }),
    certFile: etcdCert,
    keyFile: etcdKey,
    /** etcd user (etcd auth enabled): the role should be limited to the prefix. */
    username: etcdUsername,
    password: etcdPassword,
    /** gRPC receive limit: the largest reply from etcd accepted. */
    maxResponseBytes: etcdMaxResponseBytes,
    /** Bytes one range page may carry (every read pages by it). */
    pageBytes: etcdPageBytes,
    /**
     * Write txns ready at once go to etcd as one request (etcd/combining-backend.ts); this many such
     * requests run at once. 0: every txn is its own request.
     */
    combinedRequests: option({
      env: 'ETCD_COMBINED_REQUESTS',
      help: 'write txns ready at once share one etcd request; this many such requests in flight (0: one request per txn)',
      default: '1',
      schema: int(0, 64),
    }),
    /** etcd's --quota-backend-bytes (etcd 3.4 does not report it): the quota metrics divide by it. */
    quotaBytes: option({
      env: 'ETCD_QUOTA_BYTES',
      help: "etcd's --quota-backend-bytes, for the quota metrics (etcd 3.4 does not report it)",
      default: String(2 * 1024 * 1024 * 1024),
      schema: int(1024 * 1024, 64 * 1024 * 1024 * 1024),
    }),
    /** How often the db size is read for the metrics (Maintenance.Status). */
    statusIntervalMs: option({
      env: 'ETCD_STATUS_INTERVAL_MS',
      help: 'how often the etcd db size is read for the metrics',
      default: '15000',
      schema: int(100, 3_600_000),
    }),
  },
  /** Largest task payload (its JSON, bytes) accepted at submit; more: 413 PAYLOAD_TOO_LARGE. */
  maxTaskPayloadBytes: option({
    env: 'MAX_TASK_PAYLOAD_BYTES',
    help: `largest task payload (its JSON, bytes) accepted at submit, at most ${MAX_TASK_PAYLOAD_BYTES_LIMIT}; pass large inputs by reference`,
    default: String(DEFAULT_MAX_TASK_PAYLOAD_BYTES),
    schema: int(16, MAX_TASK_PAYLOAD_BYTES_LIMIT),
  }),
  /** Retention of ended tasks (on by default): see service/retention.ts and docs/operations.md. */
  retention: {
    enabled: option({
      env: 'RETENTION',
      help: 'remove ended tasks (record, payload, history) from etcd by age, count and bytes (the sink keeps what was written)',
      boolean: true,
      default: 'true',
      schema: bool,
    }),
    completed: retentionRule('completed', 'completed tasks', { ms: '3600000', count: '1000' }),
    failed: retentionRule('failed', 'failed tasks (dead letters)', { ms: '604800000', count: '10000' }),
    cancelled: retentionRule('cancelled', 'cancelled tasks', { ms: '3600000', count: '1000' }),
    /** Payload bytes all kept ended tasks may hold together; past it the oldest go first (null: no cap). */
    maxBytes: option({
      env: 'RETENTION_MAX_BYTES',
      help: 'payload bytes all kept ended tasks may hold together; past it the oldest go first, own rules too (off: no cap)',
      default: String(256 * 1024 * 1024),
      schema: limit(0, Number.MAX_SAFE_INTEGER),
    }),
    /** The count limits never remove a task that ended less than this long ago (ms). */
    minAgeMs: option({
      env: 'RETENTION_MIN_AGE_MS',
      help: 'the count limits never remove a task that ended less than this long ago',
      default: '60000',
      schema: int(0, 86_400_000),
    }),
    /** A sweep every this many ms (on every coordinator; one at a time sweeps). */
    intervalMs: option({
      env: 'RETENTION_INTERVAL_MS',
      help: 'a retention sweep every this many ms',
      default: '10000',
      schema: int(100, 3_600_000),
    }),
    /** At most this many removals per sweep (the next sweep goes on). */
    batch: option({
      env: 'RETENTION_BATCH',
      help: 'most tasks one sweep removes',
      default: '5000',
      schema: int(1, 1_000_000),
    }),
  },
  http: {
    host: server.options.host,
    port: server.options.port,
    /** Write the bound port here once listening (for tests and supervisors). */
    portFile: server.options.portFile,
    maxPayloadBytes: option({
      env: 'MAX_PAYLOAD_BYTES',
      help: 'largest WebSocket frame / HTTP body',
      default: '1048576',
      schema: int(256, 64 * 1024 * 1024),
    }),
    /** HTTPS / WSS; undefined = plaintext (loopback only, unless insecurePlaintext). */
    tls: derived(
      { certFile: server.options.tlsCert, keyFile: server.options.tlsKey, clientCaFile: tlsClientCa },
      ({ certFile, keyFile, clientCaFile }): TlsServerConfig | undefined =>
        certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile, clientCaFile },
    ),
    insecurePlaintext: server.options.insecurePlaintext,
  },
  sink: {
    url: option({
      env: 'SINK_URL',
      help: 'base URL of the sink (required)',
      schema: z
        .string(required)
        .pipe(httpUrl)
        .superRefine(refuseUnusableBaseUrl)
        .transform((url) => url.replace(/\/+$/, '')),
    }),
    key: option({
      env: 'SINK_KEY',
      help: 'coordinator bearer key at the sink (required)',
      secret: true,
      schema: secretKey,
    }),
    timeoutMs: option({
      env: 'SINK_TIMEOUT_MS',
      help: 'deadline of each sink request',
      default: '2000',
      schema: int(50, 60_000),
    }),
    /** CA that issued the sink's certificate (pinned: nothing else is trusted). */
    caFile: option({
      env: 'SINK_CA',
      help: "CA file (PEM) that issued the sink's certificate (pinned)",
      schema: optionalText,
    }),
  },
  /**
   * The Ed25519 key that signs write capabilities. Only coordinators hold it: sinks and fence-pg
   * verify with its public key (`publicKeyText`), so no verifier can make a capability.
   */
  capabilitySigningKey: option({
    env: 'CAPABILITY_SIGNING_KEY',
    help: 'id:<base64url Ed25519 seed> that signs write capabilities (required); sinks get its public key (--check-config prints it)',
    secret: true,
    schema: signingKey,
    redact: (key) => ({ id: key.id, secret: '[redacted]', publicKey: key.publicKeyText }),
  }),
  /** Per-worker credentials (the secure mode): each binds a key id and secret to one worker id. */
  workerCredentials: derived({ list: workerCredentials }, ({ list }) => list ?? [], {
    redact: (list) => list.map((w) => ({ keyId: w.keyId, workerId: w.workerId, secret: '[redacted]' })),
  }),
  /** INSECURE dev mode: shared bearer keys; the worker id is whatever the worker claims. */
  sharedWorkerKeys: derived({ keys: workerKeys }, ({ keys }) => keys ?? []),
  adminKeys: option({
    env: 'ADMIN_KEYS',
    help: 'comma-separated admin bearer keys (required)',
    secret: true,
    schema: keyList({ required: true }),
  }),
  sessionTtlMs,
  heartbeatIntervalMs: derived(
    { ttl: sessionTtlMs, interval: heartbeatIntervalMs },
    ({ ttl, interval }) => interval ?? Math.max(10, Math.floor(ttl / 4)),
  ),
  etcdLeaseMarginMs,
  etcdGiveUpMs,
  /** Advance the sink fence to the deletion revision when an owner key disappears by expiry. */
  fenceOnExpiry: option({
    env: 'FENCE_ON_EXPIRY',
    help: 'advance fences when a holder expires',
    boolean: true,
    default: 'false',
    schema: bool,
  }),
  /** Refused frames tolerated on one socket before it is closed with 1008. */
  maxBadFrames: option({
    env: 'MAX_BAD_FRAMES',
    help: 'bad frames before a socket is closed with 1008',
    default: '10',
    schema: int(1, 10_000),
  }),
  /**
   * Sessions one worker identity may hold on this coordinator at once (a credential is bound to one
   * worker id, a certificate's CN is one; in the shared-key dev mode, per claimed worker id). A
   * hello past it gets LIMIT_REACHED. Resuming a session already served here takes none.
   */
  maxSessionsPerWorker: option({
    env: 'MAX_SESSIONS_PER_WORKER',
    help: 'sessions one worker identity (credential, certificate) may hold on this coordinator; more: LIMIT_REACHED',
    default: '8',
    schema: int(1, 100_000),
  }),
  /**
   * The web console's login, per client address (an IPv6 address by its /64): `freeAttempts` wrong
   * admin keys, then each wrong key locks the address for a backoff from `backoffMs` doubling to
   * `backoffMaxMs`. Per coordinator (not shared through etcd).
   */
  consoleLogin: {
    freeAttempts: option({
      env: 'CONSOLE_LOGIN_ATTEMPTS',
      help: 'wrong console admin keys per client address (IPv6: per /64) before its logins back off',
      default: '5',
      schema: int(1, 1_000),
    }),
    backoffMs: consoleLoginBackoffMs,
    backoffMaxMs: consoleLoginBackoffMaxMs,
  },
  /** Most acquires combined into one etcd transaction and one sink advance-batch. */
  grantBatchMax: option({
    env: 'GRANT_BATCH_MAX',
    help: 'most grants per etcd txn / sink batch',
    default: '64',
    schema: int(1, 1_000),
  }),
  /** `lease.none.retryAfterMs`. */
  noLeaseRetryAfterMs: option({
    env: 'NO_LEASE_RETRY_AFTER_MS',
    help: 'retryAfterMs in lease.none',
    default: '500',
    schema: int(0, 600_000),
  }),
  /** Deepest JSON nesting accepted in a frame or body (payloads included). */
  maxJsonDepth: maxJsonDepthOption,
  /** The installation's retry policy: tasks submitted without their own get these values. */
  retryPolicy: derived(
    {
      maxAttempts: option({
        env: 'RETRY_MAX_ATTEMPTS',
        help: 'default grants per task before it fails (lease expiries count)',
        default: String(DEFAULT_RETRY_POLICY.maxAttempts),
        schema: int(1, MAX_ATTEMPTS_LIMIT),
      }),
      initialMs: option({
        env: 'RETRY_INITIAL_MS',
        help: 'default backoff after the first failed attempt',
        default: String(DEFAULT_RETRY_POLICY.backoff.initialMs),
        schema: int(0, MAX_BACKOFF_MS),
      }),
      multiplier: option({
        env: 'RETRY_MULTIPLIER',
        help: 'default backoff growth per failed attempt',
        default: String(DEFAULT_RETRY_POLICY.backoff.multiplier),
        schema: decimal(1, 100),
      }),
      maxMs: option({
        env: 'RETRY_MAX_MS',
        help: 'default cap of one backoff',
        default: String(DEFAULT_RETRY_POLICY.backoff.maxMs),
        schema: int(0, MAX_BACKOFF_MS),
      }),
      jitter: option({
        env: 'RETRY_JITTER',
        help: 'default backoff jitter, 0..1 (a delay d is drawn from [d(1-jitter), d])',
        default: String(DEFAULT_RETRY_POLICY.backoff.jitter),
        schema: decimal(0, 1),
      }),
      nonRetryable: option({
        env: 'RETRY_NON_RETRYABLE',
        help: 'default comma-separated error names that fail a task at once',
        schema: z.string().transform(splitList).pipe(RetryPolicySchema.shape.nonRetryable).optional(),
      }),
    },
    (r) =>
      resolveRetryPolicy(DEFAULT_RETRY_POLICY, {
        maxAttempts: r.maxAttempts,
        backoff: { initialMs: r.initialMs, multiplier: r.multiplier, maxMs: r.maxMs, jitter: r.jitter },
        nonRetryable: [...(r.nonRetryable ?? [])],
      }),
  ),
  /**
   * How long a coordinator that did not serve a lost lease's session waits before it settles the
   * lost attempt itself (the serving coordinator does it at once; this covers its death).
   */
  settleGraceMs: option({
    env: 'SETTLE_GRACE_MS',
    help: "wait before settling a lost attempt of a peer's session (0: at once; each coordinator tries, one lands)",
    default: '0',
    schema: int(0, 600_000),
  }),
  /** OpenTelemetry: off by default (main.ts loads the SDK only when on). */
  tracing: TRACING,
  logLevel: logLevelOption,
};

/** Cross-field rules, each run when the options it reads parsed (so they are listed with the other problems). */
const CHECKS = [
  ...server.checks,
  check({ ttl: sessionTtlMs, heartbeat: heartbeatIntervalMs }, ({ ttl, heartbeat }, { prefix }) =>
    heartbeat !== undefined && heartbeat * 3 > ttl
      ? `${prefix}HEARTBEAT_INTERVAL_MS: must be <= SESSION_TTL_MS / 3 (${Math.floor(ttl / 3)})`
      : undefined,
  ),
  check(
    { ttl: sessionTtlMs, margin: etcdLeaseMarginMs, giveUp: etcdGiveUpMs },
    ({ ttl, margin, giveUp }, { prefix }) =>
      giveUp >= ttl + margin - 1_000
        ? `${prefix}ETCD_GIVE_UP_MS: must be well below the etcd lease TTL (SESSION_TTL_MS + ETCD_LEASE_MARGIN_MS = ${ttl + margin} ms), ` +
          'or workers cannot move to a peer before their sessions end'
        : undefined,
  ),
  check({ backoff: consoleLoginBackoffMs, max: consoleLoginBackoffMaxMs }, ({ backoff, max }, { prefix }) =>
    max < backoff
      ? `${prefix}CONSOLE_LOGIN_BACKOFF_MAX_MS: must be >= CONSOLE_LOGIN_BACKOFF_MS (${backoff})`
      : undefined,
  ),
  check({ ca: tlsClientCa, cert: server.options.tlsCert }, ({ ca, cert }, { prefix }) =>
    ca !== undefined && cert === undefined
      ? `${prefix}TLS_CLIENT_CA: needs TLS_CERT and TLS_KEY (client certificates need TLS)`
      : undefined,
  ),
  check({ cert: etcdCert, key: etcdKey }, ({ cert, key }, { prefix }) =>
    (cert === undefined) === (key === undefined) ? undefined : `${prefix}ETCD_CERT / ETCD_KEY: give both or neither`,
  ),
  check({ maxResponse: etcdMaxResponseBytes, page: etcdPageBytes }, ({ maxResponse, page }, { prefix }) =>
    page * 4 > maxResponse
      ? `${prefix}ETCD_PAGE_BYTES: must be at most ETCD_MAX_RESPONSE_BYTES / 4 (${Math.floor(maxResponse / 4)}), ` +
        'so a page of records at their bound stays well under the receive limit'
      : undefined,
  ),
  check({ user: etcdUsername, password: etcdPassword }, ({ user, password }, { prefix }) =>
    (user === undefined) === (password === undefined)
      ? undefined
      : `${prefix}ETCD_USERNAME / ETCD_PASSWORD: give both or neither`,
  ),
  check(
    { credentials: workerCredentials, keys: workerKeys, clientCa: tlsClientCa },
    ({ credentials, keys, clientCa }, { prefix }) =>
      credentials === undefined && keys === undefined && clientCa === undefined
        ? `${prefix}WORKER_CREDENTIALS: required (per-worker keyId:workerId:secret), or TLS_CLIENT_CA for worker ` +
          'certificates, or WORKER_KEYS for the insecure shared-key dev mode'
        : undefined,
  ),
  removedCapabilityKeys(
    'capability-signing-key',
    'set CAPABILITY_SIGNING_KEY (an Ed25519 seed) and give the sinks its public key as CAPABILITY_PUBLIC_KEYS',
  ),
];

const CONFIG = defineConfig({ prefix: ENV_PREFIX, fields: FIELDS, checks: CHECKS });

export type CoordinatorConfig = ValueOf<typeof FIELDS>;
/** Retention of ended tasks (on by default): see service/retention.ts and docs/operations.md. */
export type RetentionConfig = CoordinatorConfig['retention'];
/** How long ended tasks of one state stay in etcd: by age and by count (null: no such limit). */
export type RetentionRule = RetentionConfig['completed'];

/** Every option, by flag name (derived from {@link FIELDS}). */
export const OPTIONS: OptionTable = CONFIG.options;

export const HELP_TEXT = formatHelp(
  'leasehold-coordinator: etcd sessions and leases, revision tokens, the fence advanced before every grant.',
  'leasehold-coordinator',
  OPTIONS,
  ENV_PREFIX,
);

export { wantsHelp };

/**
 * Resolve the configuration from the environment, the flags and an optional config file (see
 * `collectOptions` in @leasehold/protocol for precedence and `_FILE` secrets). Pure: reading files
 * is `readFile`. Returns a frozen config or throws one ConfigError listing every problem.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[] = [],
  readFile?: (path: string) => string,
): CoordinatorConfig {
  return CONFIG.load({ env, argv, ...(readFile === undefined ? {} : { readFile }) });
}

/** The config with secrets replaced, for the one start-up log line and --check-config. */
export function redactConfig(config: CoordinatorConfig): Record<string, unknown> {
  return CONFIG.redact(config);
}
