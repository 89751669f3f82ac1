/**
 * Sink configuration, declared once per option in {@link OPTIONS} (see `collectOptions` in
 * @leasehold/protocol: config file < environment < flags; secrets never as flags, `_FILE` for
 * every secret), validated once with zod and frozen. `loadConfig` is pure: main.ts passes env,
 * argv and a file reader.
 */
import {
  collectOptions,
  ConfigError,
  formatHelp,
  parseCapabilityPublicKeys,
  splitList,
  wantsHelp,
  weakSecretProblem,
  TRACING_OPTIONS,
  TRACING_RAW_SHAPE,
  tracingConfigOf,
  tracingProblems,
  type CapabilityPublicKey,
  type OptionTable,
  type TracingConfig,
} from '@leasehold/protocol';
import { z } from 'zod';
import { databaseUrlWithTls, SSL_MODES } from './store/postgres-tls.js';

export const ENV_PREFIX = 'LEASEHOLD_SINK_';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface SinkConfig {
  readonly host: string;
  /** 0 picks a free port; the bound port is logged and written to `portFile`. */
  readonly port: number;
  readonly portFile: string | undefined;
  /** HTTPS; undefined = plain HTTP (loopback only, unless insecurePlaintext). */
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  readonly insecurePlaintext: boolean;
  /** `sqlite` (embedded, the default) or `postgres` (several sinks may share one database). */
  readonly store: 'sqlite' | 'postgres';
  readonly dbPath: string;
  /**
   * PostgreSQL URL (store=postgres). Carries a password: never logged (see redactConfig). TLS is
   * in it as libpq spells it (`sslmode=verify-full&sslrootcert=...`), from the URL itself or from
   * the `database-ssl-mode` / `database-ca` / `database-cert` / `database-key` options.
   */
  readonly databaseUrl: string | undefined;
  /** PostgreSQL pool connections per sink process. */
  readonly databasePoolSize: number;
  readonly synchronous: 'FULL' | 'NORMAL';
  /** Run SQLite in a worker thread so commits (fsync) do not stall the HTTP event loop. */
  readonly storeThread: boolean;
  /** Keep at least this many newest decision-log entries; 0 keeps all. */
  readonly decisionRetention: number;
  readonly bodyLimitBytes: number;
  /** Byte budget of one read page (`GET /v1/resources/:resource`, `/v1/decisions`); one larger result comes alone. */
  readonly readPageMaxBytes: number;
  /** Deepest JSON nesting accepted in a body. */
  readonly maxJsonDepth: number;
  readonly maxBatchOps: number;
  readonly shutdownTimeoutMs: number;
  /** `GET /v1/events`: a keepalive comment this often. */
  readonly eventsKeepaliveMs: number;
  /** `GET /v1/events`: streams open at once (more get 503). */
  readonly eventsMaxClients: number;
  /** `GET /v1/events`: a stream with more unsent bytes than this is cut off. */
  readonly eventsMaxBufferedBytes: number;
  /** `GET /v1/events`: refusal events per second at most (the rest are counted as suppressed). */
  readonly eventsRefusalsPerSecond: number;
  readonly logLevel: LogLevel;
  /** OpenTelemetry: off by default (main.ts loads the SDK only when on). */
  readonly tracing: TracingConfig;
  /** Bearer keys of the coordinator: advances, reads, decisions. */
  readonly coordinatorKeys: readonly string[];
  /** Extra bearer keys that may only read (resources, results, decisions). */
  readonly readKeys: readonly string[];
  /** Ed25519 public keys (`id:key`) that verify write capabilities; the sink holds nothing that signs. */
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[];
  /**
   * TEST ONLY. `skip-fence` accepts writes whatever their token (the fence check is skipped), so
   * the chaos checker can prove it detects stale writes. Refused unless LEASEHOLD_ALLOW_SABOTAGE=1.
   */
  readonly testSabotage: 'skip-fence' | undefined;
}

/** Every option, by flag name (declared once: env, flag, config-file key, default, help, secret). */
export const OPTIONS: OptionTable = Object.freeze({
  host: { env: 'HOST', help: 'listen address', default: '127.0.0.1' },
  port: { env: 'PORT', help: 'listen port; 0 = any free port', default: '7400' },
  'port-file': { env: 'PORT_FILE', help: 'write the bound port here once listening' },
  'tls-cert': { env: 'TLS_CERT', help: 'serve HTTPS with this certificate file (PEM); reloaded on SIGHUP' },
  'tls-key': { env: 'TLS_KEY', help: 'its private key file (PEM)' },
  'insecure-plaintext': {
    env: 'INSECURE_PLAINTEXT',
    help: 'serve plain HTTP on a non-loopback address (keys cross the network in clear)',
    boolean: true,
    default: 'false',
  },
  store: { env: 'STORE', help: 'sqlite (embedded) or postgres', default: 'sqlite' },
  'db-path': { env: 'DB_PATH', help: 'SQLite database file (store sqlite)', default: './leasehold-sink.db' },
  'database-url': {
    env: 'DATABASE_URL',
    help: 'postgres://user@host:port/db (store postgres); a URL with a password only from env / file',
    fromFile: true,
  },
  'database-pool-size': { env: 'DATABASE_POOL_SIZE', help: 'PostgreSQL connections per sink', default: '4' },
  'database-ssl-mode': {
    env: 'DATABASE_SSL_MODE',
    help: "TLS to PostgreSQL: verify-full (its certificate checked against DATABASE_CA and the URL's host) or disable",
  },
  'database-ca': { env: 'DATABASE_CA', help: "CA file (PEM) of PostgreSQL's certificate (or system)" },
  'database-cert': { env: 'DATABASE_CERT', help: "client certificate file (PEM) for PostgreSQL's cert authentication" },
  'database-key': { env: 'DATABASE_KEY', help: 'its private key file (PEM)' },
  synchronous: { env: 'SYNCHRONOUS', help: 'FULL|NORMAL (FULL: acked writes survive power loss)', default: 'FULL' },
  'store-thread': { env: 'STORE_THREAD', help: 'true|false: SQLite in a worker thread', default: 'true' },
  'decision-retention': { env: 'DECISION_RETENTION', help: 'newest decisions kept, 0 = all', default: '1000000' },
  'body-limit-bytes': { env: 'BODY_LIMIT_BYTES', help: 'largest request body', default: '1048576' },
  'read-page-max-bytes': {
    env: 'READ_PAGE_MAX_BYTES',
    help: "largest page of a read (a resource's results, decisions); a bigger single result comes alone",
    default: '4194304',
  },
  'max-json-depth': { env: 'MAX_JSON_DEPTH', help: 'deepest JSON nesting accepted in a body', default: '64' },
  'max-batch-ops': { env: 'MAX_BATCH_OPS', help: 'ops per group commit', default: '2000' },
  'shutdown-timeout-ms': { env: 'SHUTDOWN_TIMEOUT_MS', help: 'time to drain on SIGTERM', default: '10000' },
  'events-keepalive-ms': { env: 'EVENTS_KEEPALIVE_MS', help: 'event stream keepalive interval', default: '15000' },
  'events-max-clients': { env: 'EVENTS_MAX_CLIENTS', help: 'event streams open at once', default: '64' },
  'events-max-buffered-bytes': {
    env: 'EVENTS_MAX_BUFFERED_BYTES',
    help: 'unsent bytes after which a slow event stream is cut off',
    default: '1048576',
  },
  'events-refusals-per-second': {
    env: 'EVENTS_REFUSALS_PER_SECOND',
    help: 'refusal events published per second at most',
    default: '100',
  },
  ...TRACING_OPTIONS,
  'log-level': { env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent', default: 'info' },
  'coordinator-keys': {
    env: 'COORDINATOR_KEYS',
    help: 'bearer keys (>= 16 chars) for advances and reads (required)',
    secret: true,
  },
  'read-keys': { env: 'READ_KEYS', help: 'bearer keys that may only read', secret: true },
  'capability-public-keys': {
    env: 'CAPABILITY_PUBLIC_KEYS',
    help: "id:key,... Ed25519 public keys that verify write capabilities (required; the coordinators' signing keys)",
    fromFile: true,
  },
  'capability-keys': {
    env: 'CAPABILITY_KEYS',
    help: 'REMOVED in 0.2 (shared HMAC secrets): use capability-public-keys',
    secret: true,
  },
  'test-sabotage': { env: 'TEST_SABOTAGE', help: 'TEST ONLY: skip-fence (needs LEASEHOLD_ALLOW_SABOTAGE=1)' },
});

export const HELP_TEXT = `${formatHelp(
  'leasehold-sink: the fenced write target (SQLite or PostgreSQL, group commit, HTTP)',
  'leasehold-sink',
  OPTIONS,
  ENV_PREFIX,
)}
`;

const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, 'must be a non-negative decimal integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const requiredString = {
  error: (issue: { input?: unknown }) => (issue.input === undefined ? 'is required' : 'must be a string'),
};

const keyList = (required: boolean) =>
  z
    .string(requiredString)
    .transform(splitList)
    .pipe(
      z
        .array(
          z
            .string()
            .max(512)
            .superRefine((key, ctx) => {
              const problem = weakSecretProblem(key);
              if (problem !== undefined) ctx.addIssue({ code: 'custom', message: `a key ${problem}` });
            }),
        )
        .min(required ? 1 : 0, 'at least one key is required'),
    );

const capabilityPublicKeys = z.string(requiredString).transform((text, ctx): CapabilityPublicKey[] => {
  try {
    const keys = parseCapabilityPublicKeys(text);
    if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'at least one capability public key is required' });
    return keys;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return [];
  }
});

const RawSchema = z
  .object({
    HOST: z.string().min(1),
    PORT: int(0, 65535),
    PORT_FILE: z.string().min(1).optional(),
    TLS_CERT: z.string().min(1).optional(),
    TLS_KEY: z.string().min(1).optional(),
    INSECURE_PLAINTEXT: z.enum(['true', 'false']).transform((v) => v === 'true'),
    STORE: z.enum(['sqlite', 'postgres']),
    DB_PATH: z.string().min(1),
    DATABASE_URL: z
      .string()
      .refine((u) => /^postgres(ql)?:\/\/./.test(u) && URL.canParse(u), 'must be a postgres:// or postgresql:// URL')
      .optional(),
    DATABASE_POOL_SIZE: int(1, 100),
    DATABASE_SSL_MODE: z.enum(SSL_MODES).optional(),
    DATABASE_CA: z.string().min(1).optional(),
    DATABASE_CERT: z.string().min(1).optional(),
    DATABASE_KEY: z.string().min(1).optional(),
    SYNCHRONOUS: z.enum(['FULL', 'NORMAL']),
    STORE_THREAD: z.enum(['true', 'false']).transform((v) => v === 'true'),
    DECISION_RETENTION: int(0, Number.MAX_SAFE_INTEGER),
    BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024),
    READ_PAGE_MAX_BYTES: int(64 * 1024, 64 * 1024 * 1024),
    MAX_JSON_DEPTH: int(2, 1_000),
    MAX_BATCH_OPS: int(1, 100_000),
    SHUTDOWN_TIMEOUT_MS: int(100, 600_000),
    EVENTS_KEEPALIVE_MS: int(100, 3_600_000),
    EVENTS_MAX_CLIENTS: int(0, 100_000),
    EVENTS_MAX_BUFFERED_BYTES: int(1024, 1024 * 1024 * 1024),
    EVENTS_REFUSALS_PER_SECOND: int(1, 1_000_000),
    LOG_LEVEL: z.enum(LOG_LEVELS),
    ...TRACING_RAW_SHAPE,
    COORDINATOR_KEYS: keyList(true),
    READ_KEYS: keyList(false).default([]),
    CAPABILITY_PUBLIC_KEYS: capabilityPublicKeys,
    CAPABILITY_KEYS: z
      .string()
      .optional()
      .refine((v) => v === undefined, {
        error:
          'shared HMAC capability keys are gone (a verifier could sign with them): give the sink the ' +
          "coordinators' Ed25519 public keys as CAPABILITY_PUBLIC_KEYS instead (docs/security.md, Capabilities)",
      }),
    TEST_SABOTAGE: z.enum(['skip-fence']).optional(),
  })
  .refine((c) => !c.READ_KEYS.some((k) => c.COORDINATOR_KEYS.includes(k)), {
    error: 'a key may not be both a coordinator key and a read-only key',
    path: ['READ_KEYS'],
  })
  .refine((c) => c.STORE !== 'postgres' || c.DATABASE_URL !== undefined, {
    error: 'is required with --store postgres (or LEASEHOLD_SINK_DATABASE_URL_FILE)',
    path: ['DATABASE_URL'],
  })
  .refine((c) => (c.TLS_CERT === undefined) === (c.TLS_KEY === undefined), {
    error: 'give both TLS_CERT and TLS_KEY, or neither',
    path: ['TLS_CERT'],
  })
  .refine((c) => c.TLS_CERT !== undefined || c.INSECURE_PLAINTEXT || LOOPBACK.test(c.HOST), {
    error: 'is not a loopback address: serve TLS (TLS_CERT, TLS_KEY) or set LEASEHOLD_SINK_INSECURE_PLAINTEXT=true',
    path: ['HOST'],
  });

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

/** The password of a database URL, if it has one. */
function passwordOf(url: string): string {
  return URL.canParse(url) ? new URL(url).password : '';
}

/** The URL with its password replaced by `***` (for logs). */
export function redactDatabaseUrl(url: string): string {
  if (!URL.canParse(url)) return '(unparsable URL)';
  const parsed = new URL(url);
  if (parsed.password !== '') parsed.password = '***';
  return parsed.toString();
}

export interface ConfigDeps {
  /** Reads `--config` and `*_FILE` files (main.ts passes fs.readFileSync). */
  readonly readFile?: (path: string) => string;
}

export { wantsHelp };

/**
 * Resolve the configuration from `env`, `argv` (process.argv.slice(2)) and an optional config
 * file. Returns a frozen config or throws one ConfigError listing every problem.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  deps: ConfigDeps = {},
): SinkConfig {
  const { raw, problems, origin } = collectOptions(OPTIONS, ENV_PREFIX, {
    env,
    argv,
    ...(deps.readFile === undefined ? {} : { readFile: deps.readFile }),
  });
  if (origin.DATABASE_URL?.startsWith('--') === true && passwordOf(raw.DATABASE_URL ?? '') !== '') {
    problems.push(
      `--database-url: a URL with a password is visible in ps; give it in ${ENV_PREFIX}DATABASE_URL or ${ENV_PREFIX}DATABASE_URL_FILE`,
    );
  }
  const source = origin;
  const parsed = RawSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? '');
      const where = source[key] ?? `${ENV_PREFIX}${key}`;
      problems.push(`${where}: ${issue.message}`);
    }
  }
  if (raw.TEST_SABOTAGE !== undefined && env.LEASEHOLD_ALLOW_SABOTAGE !== '1') {
    problems.push(`${ENV_PREFIX}TEST_SABOTAGE: a test-only switch; also set LEASEHOLD_ALLOW_SABOTAGE=1 to use it`);
  }
  problems.push(...tracingProblems(raw, ENV_PREFIX));
  const database =
    parsed.success && parsed.data.DATABASE_URL !== undefined
      ? databaseUrlWithTls(parsed.data.DATABASE_URL, parsed.data, ENV_PREFIX)
      : undefined;
  problems.push(...(database?.problems ?? []));
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  const c = parsed.data;
  return Object.freeze({
    host: c.HOST,
    port: c.PORT,
    tls: c.TLS_CERT === undefined || c.TLS_KEY === undefined ? undefined : { certFile: c.TLS_CERT, keyFile: c.TLS_KEY },
    insecurePlaintext: c.INSECURE_PLAINTEXT,
    portFile: c.PORT_FILE,
    store: c.STORE,
    dbPath: c.DB_PATH,
    databaseUrl: database?.url,
    databasePoolSize: c.DATABASE_POOL_SIZE,
    synchronous: c.SYNCHRONOUS,
    storeThread: c.STORE_THREAD,
    decisionRetention: c.DECISION_RETENTION,
    bodyLimitBytes: c.BODY_LIMIT_BYTES,
    readPageMaxBytes: c.READ_PAGE_MAX_BYTES,
    maxJsonDepth: c.MAX_JSON_DEPTH,
    maxBatchOps: c.MAX_BATCH_OPS,
    shutdownTimeoutMs: c.SHUTDOWN_TIMEOUT_MS,
    eventsKeepaliveMs: c.EVENTS_KEEPALIVE_MS,
    eventsMaxClients: c.EVENTS_MAX_CLIENTS,
    eventsMaxBufferedBytes: c.EVENTS_MAX_BUFFERED_BYTES,
    eventsRefusalsPerSecond: c.EVENTS_REFUSALS_PER_SECOND,
    logLevel: c.LOG_LEVEL,
    tracing: Object.freeze(tracingConfigOf(c)),
    coordinatorKeys: Object.freeze([...c.COORDINATOR_KEYS]),
    readKeys: Object.freeze([...c.READ_KEYS]),
    capabilityPublicKeys: Object.freeze(c.CAPABILITY_PUBLIC_KEYS.map((k) => Object.freeze({ ...k }))),
    testSabotage: c.TEST_SABOTAGE,
  });
}

/** The config for logging: secrets replaced by counts and key ids. */
export function redactConfig(config: SinkConfig): Record<string, unknown> {
  const { coordinatorKeys, readKeys, capabilityPublicKeys, databaseUrl, ...rest } = config;
  return {
    ...rest,
    databaseUrl: databaseUrl === undefined ? undefined : redactDatabaseUrl(databaseUrl),
    coordinatorKeys: `${coordinatorKeys.length} key(s)`,
    readKeys: `${readKeys.length} key(s)`,
    capabilityPublicKeyIds: capabilityPublicKeys.map((k) => k.id),
  };
}
