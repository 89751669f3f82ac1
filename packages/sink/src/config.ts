/**
 * Sink configuration, each option declared once in {@link FIELDS} at the place its value takes in
 * {@link SinkConfig} (see `defineConfig` in @leasehold/protocol: env `LEASEHOLD_SINK_<ENV>`, flag
 * and config-file key `--<env-in-kebab-case>`, default, help, secret, parser; config file <
 * environment < flags; secrets never as flags, `_FILE` for every secret). The type, the option
 * table, `--help`, the defaults and the redaction are derived; the cross-field rules are
 * {@link CHECKS}. Validated once and frozen. `loadConfig` is pure: main.ts passes env, argv and a
 * file reader.
 */
import {
  check,
  defineConfig,
  derived,
  formatHelp,
  option,
  parseCapabilityPublicKeys,
  TRACING,
  wantsHelp,
  type CapabilityPublicKey,
  type OptionTable,
  type ValueOf,
} from '@leasehold/protocol';
import {
  bool,
  int,
  keyList,
  logLevelOption,
  maxJsonDepthOption,
  optionalText,
  removedCapabilityKeys,
  required,
  serverOptions,
} from '@leasehold/daemon-kit';
import { z } from 'zod';
import { databaseUrlWithTls, SSL_MODES } from './store/postgres-tls.js';

export { LOG_LEVELS, type LogLevel } from '@leasehold/daemon-kit';

export const ENV_PREFIX = 'LEASEHOLD_SINK_';

const capabilityPublicKeys = z.string(required).transform((text, ctx): CapabilityPublicKey[] => {
  try {
    const keys = parseCapabilityPublicKeys(text);
    if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'at least one capability public key is required' });
    return keys;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return [];
  }
});

/** The URL with its password replaced by `***` (for logs). */
export function redactDatabaseUrl(url: string): string {
  if (!URL.canParse(url)) return '(unparsable URL)';
  const parsed = new URL(url);
  if (parsed.password !== '') parsed.password = '***';
  return parsed.toString();
}

const server = serverOptions({ defaultPort: '7400', serves: 'HTTPS' });

// Options several fields or checks read: declared once here, placed below.
const store = option({
  env: 'STORE',
  help: 'sqlite (embedded) or postgres',
  default: 'sqlite',
  schema: z.enum(['sqlite', 'postgres']),
});
const databaseUrl = option({
  env: 'DATABASE_URL',
  help: 'postgres://user@host:port/db (store postgres); a URL with a password only from env / file',
  fromFile: true,
  schema: z
    .string()
    .refine((u) => /^postgres(ql)?:\/\/./.test(u) && URL.canParse(u), 'must be a postgres:// or postgresql:// URL')
    .optional(),
});
const coordinatorKeys = option({
  env: 'COORDINATOR_KEYS',
  help: 'bearer keys (>= 16 chars) for advances and reads (required)',
  secret: true,
  schema: keyList({ required: true }),
});
const readKeys = option({
  env: 'READ_KEYS',
  help: 'bearer keys that may only read',
  secret: true,
  schema: keyList({ required: false }).default([]),
});

const FIELDS = {
  host: server.options.host,
  /** 0 picks a free port; the bound port is logged and written to `portFile`. */
  port: server.options.port,
  portFile: server.options.portFile,
  /** HTTPS; undefined = plain HTTP (loopback only, unless insecurePlaintext). */
  tls: derived(
    { certFile: server.options.tlsCert, keyFile: server.options.tlsKey },
    ({ certFile, keyFile }): { readonly certFile: string; readonly keyFile: string } | undefined =>
      certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile },
  ),
  insecurePlaintext: server.options.insecurePlaintext,
  /** `sqlite` (embedded, the default) or `postgres` (several sinks may share one database). */
  store,
  dbPath: option({
    env: 'DB_PATH',
    help: 'SQLite database file (store sqlite)',
    default: './leasehold-sink.db',
    schema: z.string().min(1),
  }),
  /**
   * PostgreSQL URL (store=postgres). Carries a password: never logged (see redactConfig). TLS is
   * in it as libpq spells it (`sslmode=verify-full&sslrootcert=...`), from the URL itself or from
   * the `database-ssl-mode` / `database-ca` / `database-cert` / `database-key` options.
   */
  databaseUrl: derived(
    {
      url: databaseUrl,
      sslMode: option({
        env: 'DATABASE_SSL_MODE',
        help: "TLS to PostgreSQL: verify-full (its certificate checked against DATABASE_CA and the URL's host) or disable",
        schema: z.enum(SSL_MODES).optional(),
      }),
      ca: option({
        env: 'DATABASE_CA',
        help: "CA file (PEM) of PostgreSQL's certificate (or system)",
        schema: optionalText,
      }),
      cert: option({
        env: 'DATABASE_CERT',
        help: "client certificate file (PEM) for PostgreSQL's cert authentication",
        schema: optionalText,
      }),
      key: option({ env: 'DATABASE_KEY', help: 'its private key file (PEM)', schema: optionalText }),
    },
    ({ url, ...tls }, { prefix, report }): string | undefined => {
      if (url === undefined) return undefined;
      const withTls = databaseUrlWithTls(url, tls, prefix);
      for (const problem of withTls.problems) report(problem);
      return withTls.url;
    },
    { redact: (url) => (url === undefined ? undefined : redactDatabaseUrl(url)) },
  ),
  /** PostgreSQL pool connections per sink process. */
  databasePoolSize: option({
    env: 'DATABASE_POOL_SIZE',
    help: 'PostgreSQL connections per sink',
    default: '4',
    schema: int(1, 100),
  }),
  synchronous: option({
    env: 'SYNCHRONOUS',
    help: 'FULL|NORMAL (FULL: acked writes survive power loss)',
    default: 'FULL',
    schema: z.enum(['FULL', 'NORMAL']),
  }),
  /** Run SQLite in a worker thread so commits (fsync) do not stall the HTTP event loop. */
  storeThread: option({
    env: 'STORE_THREAD',
    help: 'true|false: SQLite in a worker thread',
    default: 'true',
    schema: bool,
  }),
  /** Keep at least this many newest decision-log entries; 0 keeps all. */
  decisionRetention: option({
    env: 'DECISION_RETENTION',
    help: 'newest decisions kept, 0 = all',
    default: '1000000',
    schema: int(0, Number.MAX_SAFE_INTEGER),
  }),
  bodyLimitBytes: option({
    env: 'BODY_LIMIT_BYTES',
    help: 'largest request body',
    default: '1048576',
    schema: int(1024, 64 * 1024 * 1024),
  }),
  /** Byte budget of one read page (`GET /v1/resources/:resource`, `/v1/decisions`); one larger result comes alone. */
  readPageMaxBytes: option({
    env: 'READ_PAGE_MAX_BYTES',
    help: "largest page of a read (a resource's results, decisions); a bigger single result comes alone",
    default: '4194304',
    schema: int(64 * 1024, 64 * 1024 * 1024),
  }),
  /**
   * Capability checks remembered: capabilities verified before, and those fence advances vouched
   * for until their first write. Size it to the grants outstanding between their advance and their
   * write (at most ~1.4 KB each, measured: 16384 take ≤ 23 MB); past it, the oldest are verified
   * by signature again.
   */
  capabilityCacheEntries: option({
    env: 'CAPABILITY_CACHE_ENTRIES',
    help: 'capability checks remembered (vouched grants until their first write); 0 = none',
    default: '16384',
    schema: int(0, 10_000_000),
  }),
  /** Deepest JSON nesting accepted in a body. */
  maxJsonDepth: maxJsonDepthOption,
  maxBatchOps: option({
    env: 'MAX_BATCH_OPS',
    help: 'ops per group commit',
    default: '2000',
    schema: int(1, 100_000),
  }),
  shutdownTimeoutMs: option({
    env: 'SHUTDOWN_TIMEOUT_MS',
    help: 'time to drain on SIGTERM',
    default: '10000',
    schema: int(100, 600_000),
  }),
  /** `GET /v1/events`: a keepalive comment this often. */
  eventsKeepaliveMs: option({
    env: 'EVENTS_KEEPALIVE_MS',
    help: 'event stream keepalive interval',
    default: '15000',
    schema: int(100, 3_600_000),
  }),
  /** `GET /v1/events`: streams open at once (more get 503). */
  eventsMaxClients: option({
    env: 'EVENTS_MAX_CLIENTS',
    help: 'event streams open at once',
    default: '64',
    schema: int(0, 100_000),
  }),
  /** `GET /v1/events`: a stream with more unsent bytes than this is cut off. */
  eventsMaxBufferedBytes: option({
    env: 'EVENTS_MAX_BUFFERED_BYTES',
    help: 'unsent bytes after which a slow event stream is cut off',
    default: '1048576',
    schema: int(1024, 1024 * 1024 * 1024),
  }),
  /** `GET /v1/events`: refusal events per second at most (the rest are counted as suppressed). */
  eventsRefusalsPerSecond: option({
    env: 'EVENTS_REFUSALS_PER_SECOND',
    help: 'refusal events published per second at most',
    default: '100',
    schema: int(1, 1_000_000),
  }),
  logLevel: logLevelOption,
  /** OpenTelemetry: off by default (main.ts loads the SDK only when on). */
  tracing: TRACING,
  /** Bearer keys of the coordinator: advances, reads, decisions. */
  coordinatorKeys,
  /** Extra bearer keys that may only read (resources, results, decisions). */
  readKeys,
  /** Ed25519 public keys (`id:key`) that verify write capabilities; the sink holds nothing that signs. */
  capabilityPublicKeys: option({
    env: 'CAPABILITY_PUBLIC_KEYS',
    help: "id:key,... Ed25519 public keys that verify write capabilities (required; the coordinators' signing keys)",
    fromFile: true,
    schema: capabilityPublicKeys,
    redact: (keys) => keys.map((k) => k.id),
  }),
};

/** Cross-field rules, each run when the options it reads parsed. */
const CHECKS = [
  ...server.checks,
  check({ url: databaseUrl }, ({ url }, { prefix, where }) =>
    url !== undefined && where(databaseUrl).startsWith('--') && URL.canParse(url) && new URL(url).password !== ''
      ? `--database-url: a URL with a password is visible in ps; give it in ${prefix}DATABASE_URL or ${prefix}DATABASE_URL_FILE`
      : undefined,
  ),
  check({ store, url: databaseUrl }, ({ store, url }, { prefix, where }) =>
    store === 'postgres' && url === undefined
      ? `${where(databaseUrl)}: is required with --store postgres (or ${prefix}DATABASE_URL_FILE)`
      : undefined,
  ),
  check({ coordinator: coordinatorKeys, readOnly: readKeys }, ({ coordinator, readOnly }, { where }) =>
    readOnly.some((k) => coordinator.includes(k))
      ? `${where(readKeys)}: a key may not be both a coordinator key and a read-only key`
      : undefined,
  ),
  removedCapabilityKeys(
    'capability-public-keys',
    "give the sink the coordinators' Ed25519 public keys as CAPABILITY_PUBLIC_KEYS instead",
  ),
];

const CONFIG = defineConfig({ prefix: ENV_PREFIX, fields: FIELDS, checks: CHECKS });

export type SinkConfig = ValueOf<typeof FIELDS>;

/** Every option, by flag name (derived from {@link FIELDS}). */
export const OPTIONS: OptionTable = CONFIG.options;

export const HELP_TEXT = formatHelp(
  'leasehold-sink: the fenced write target (SQLite or PostgreSQL, group commit, HTTP)',
  'leasehold-sink',
  OPTIONS,
  ENV_PREFIX,
);

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
  return CONFIG.load({ env, argv, ...(deps.readFile === undefined ? {} : { readFile: deps.readFile }) });
}

/** The config for logging: secrets redacted, the database password masked, public keys by id. */
export function redactConfig(config: SinkConfig): Record<string, unknown> {
  return CONFIG.redact(config);
}
