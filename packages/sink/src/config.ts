/**
 * Sink configuration: environment (`LEASEHOLD_SINK_*`) overridden by command-line flags, validated
 * once with zod and frozen. `loadConfig` is pure (no process access): main.ts passes env and argv.
 * Secrets (keys) come only from the environment, never from flags (argv is visible in `ps`).
 */
import { ConfigError, parseCapabilityKeys, type CapabilityKey } from '@leasehold/protocol';
import { z } from 'zod';

export const ENV_PREFIX = 'LEASEHOLD_SINK_';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface SinkConfig {
  readonly host: string;
  /** 0 picks a free port; the bound port is logged and written to `portFile`. */
  readonly port: number;
  readonly portFile: string | undefined;
  /** `sqlite` (embedded, the default) or `postgres` (several sinks may share one database). */
  readonly store: 'sqlite' | 'postgres';
  readonly dbPath: string;
  /** PostgreSQL URL (store=postgres). Carries a password: never logged (see redactConfig). */
  readonly databaseUrl: string | undefined;
  /** PostgreSQL pool connections per sink process. */
  readonly databasePoolSize: number;
  readonly synchronous: 'FULL' | 'NORMAL';
  /** Run SQLite in a worker thread so commits (fsync) do not stall the HTTP event loop. */
  readonly storeThread: boolean;
  /** Keep at least this many newest decision-log entries; 0 keeps all. */
  readonly decisionRetention: number;
  readonly bodyLimitBytes: number;
  readonly maxBatchOps: number;
  readonly shutdownTimeoutMs: number;
  readonly logLevel: LogLevel;
  /** Bearer keys of the coordinator: advances, reads, decisions. */
  readonly coordinatorKeys: readonly string[];
  /** Extra bearer keys that may only read (resources, results, decisions). */
  readonly readKeys: readonly string[];
  /** Capability keys (`id:secret`); all verify write capabilities. */
  readonly capabilityKeys: readonly CapabilityKey[];
  /**
   * TEST ONLY. `skip-fence` accepts writes whatever their token (the fence check is skipped), so
   * the chaos checker can prove it detects stale writes. Refused unless LEASEHOLD_ALLOW_SABOTAGE=1.
   */
  readonly testSabotage: 'skip-fence' | undefined;
}

/** Settings that flags may set, with their env suffix. Keys are env-only. */
const FLAGS: Readonly<Record<string, string>> = {
  '--host': 'HOST',
  '--port': 'PORT',
  '--port-file': 'PORT_FILE',
  '--store': 'STORE',
  '--db-path': 'DB_PATH',
  '--database-url': 'DATABASE_URL',
  '--database-pool-size': 'DATABASE_POOL_SIZE',
  '--synchronous': 'SYNCHRONOUS',
  '--store-thread': 'STORE_THREAD',
  '--decision-retention': 'DECISION_RETENTION',
  '--body-limit-bytes': 'BODY_LIMIT_BYTES',
  '--max-batch-ops': 'MAX_BATCH_OPS',
  '--shutdown-timeout-ms': 'SHUTDOWN_TIMEOUT_MS',
  '--log-level': 'LOG_LEVEL',
};

export const HELP_TEXT = `leasehold-sink: the fenced write target (SQLite or PostgreSQL, group commit, HTTP)

Usage: leasehold-sink [flags]     (flags override LEASEHOLD_SINK_* environment variables)

  --host HOST                  LEASEHOLD_SINK_HOST                 default 127.0.0.1
  --port N                     LEASEHOLD_SINK_PORT                 default 7400; 0 = any free port
  --port-file PATH             LEASEHOLD_SINK_PORT_FILE            write the bound port here once listening
  --store sqlite|postgres      LEASEHOLD_SINK_STORE                default sqlite (embedded)
  --db-path PATH               LEASEHOLD_SINK_DB_PATH              default ./leasehold-sink.db (sqlite)
  --database-url URL           LEASEHOLD_SINK_DATABASE_URL         postgres://user@host:port/db (postgres; a URL
                                                                   with a password only from the environment)
  --database-pool-size N       LEASEHOLD_SINK_DATABASE_POOL_SIZE   default 4 (postgres)
  --synchronous FULL|NORMAL    LEASEHOLD_SINK_SYNCHRONOUS          default FULL (acked writes survive power loss)
  --store-thread true|false     LEASEHOLD_SINK_STORE_THREAD         SQLite in a worker thread; default true
  --decision-retention N       LEASEHOLD_SINK_DECISION_RETENTION   newest decisions kept, 0 = all; default 1000000
  --body-limit-bytes N         LEASEHOLD_SINK_BODY_LIMIT_BYTES     default 1048576
  --max-batch-ops N            LEASEHOLD_SINK_MAX_BATCH_OPS        ops per group commit, default 2000
  --shutdown-timeout-ms N      LEASEHOLD_SINK_SHUTDOWN_TIMEOUT_MS  default 10000
  --log-level LEVEL            LEASEHOLD_SINK_LOG_LEVEL            fatal|error|warn|info|debug|trace|silent
  --help                       print this and exit
  Environment only (secrets):
    LEASEHOLD_SINK_COORDINATOR_KEYS  comma-separated bearer keys (>= 16 chars) for advances and reads (required)
    LEASEHOLD_SINK_READ_KEYS         comma-separated bearer keys that may only read (optional)
    LEASEHOLD_SINK_CAPABILITY_KEYS   id:secret,... keys that verify write capabilities (required)
    LEASEHOLD_SINK_DATABASE_URL_FILE file holding the PostgreSQL URL (instead of LEASEHOLD_SINK_DATABASE_URL)
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
    .transform((s) =>
      s
        .split(',')
        .map((k) => k.trim())
        .filter((k) => k.length > 0),
    )
    .pipe(
      z
        .array(z.string().min(16, 'each key must be at least 16 characters').max(512))
        .min(required ? 1 : 0, 'at least one key is required'),
    );

const capabilityKeys = z.string(requiredString).transform((text, ctx): CapabilityKey[] => {
  try {
    const keys = parseCapabilityKeys(text);
    if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'at least one capability key is required' });
    if (new Set(keys.map((k) => k.id)).size !== keys.length) {
      ctx.addIssue({ code: 'custom', message: 'capability key ids must be unique' });
    }
    return keys;
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
    return [];
  }
});

const RawSchema = z
  .object({
    HOST: z.string().min(1).default('127.0.0.1'),
    PORT: int(0, 65535).default(7400),
    PORT_FILE: z.string().min(1).optional(),
    STORE: z.enum(['sqlite', 'postgres']).default('sqlite'),
    DB_PATH: z.string().min(1).default('./leasehold-sink.db'),
    DATABASE_URL: z
      .string()
      .refine((u) => /^postgres(ql)?:\/\/./.test(u) && URL.canParse(u), 'must be a postgres:// or postgresql:// URL')
      .optional(),
    DATABASE_POOL_SIZE: int(1, 100).default(4),
    SYNCHRONOUS: z.enum(['FULL', 'NORMAL']).default('FULL'),
    STORE_THREAD: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
    DECISION_RETENTION: int(0, Number.MAX_SAFE_INTEGER).default(1_000_000),
    BODY_LIMIT_BYTES: int(1024, 64 * 1024 * 1024).default(1024 * 1024),
    MAX_BATCH_OPS: int(1, 100_000).default(2000),
    SHUTDOWN_TIMEOUT_MS: int(100, 600_000).default(10_000),
    LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
    COORDINATOR_KEYS: keyList(true),
    READ_KEYS: keyList(false).default([]),
    CAPABILITY_KEYS: capabilityKeys,
    TEST_SABOTAGE: z.enum(['skip-fence']).optional(),
  })
  .refine((c) => !c.READ_KEYS.some((k) => c.COORDINATOR_KEYS.includes(k)), {
    error: 'a key may not be both a coordinator key and a read-only key',
    path: ['READ_KEYS'],
  })
  .refine((c) => c.STORE !== 'postgres' || c.DATABASE_URL !== undefined, {
    error: 'is required with --store postgres (or LEASEHOLD_SINK_DATABASE_URL_FILE)',
    path: ['DATABASE_URL'],
  });

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
  /** Reads `LEASEHOLD_SINK_DATABASE_URL_FILE` (main.ts passes fs.readFileSync). */
  readonly readFile?: (path: string) => string;
}

/** True when argv asks for help (main prints {@link HELP_TEXT} and exits 0). */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/**
 * Resolve the configuration from `env` and `argv` (process.argv.slice(2)). Returns a frozen config
 * or throws one ConfigError listing every problem.
 */
export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[],
  deps: ConfigDeps = {},
): SinkConfig {
  const problems: string[] = [];
  const raw: Record<string, string> = {};
  const source: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || value === undefined || value === '') continue;
    raw[name.slice(ENV_PREFIX.length)] = value;
    source[name.slice(ENV_PREFIX.length)] = name;
  }
  const urlFile = raw.DATABASE_URL_FILE;
  delete raw.DATABASE_URL_FILE;
  if (urlFile !== undefined) {
    if (raw.DATABASE_URL !== undefined) {
      problems.push(`${ENV_PREFIX}DATABASE_URL_FILE: set either it or ${ENV_PREFIX}DATABASE_URL, not both`);
    } else if (deps.readFile === undefined) {
      problems.push(`${ENV_PREFIX}DATABASE_URL_FILE: no file reader given`);
    } else {
      try {
        raw.DATABASE_URL = deps.readFile(urlFile).trim();
        source.DATABASE_URL = `${ENV_PREFIX}DATABASE_URL_FILE (${urlFile})`;
      } catch (err) {
        problems.push(
          `${ENV_PREFIX}DATABASE_URL_FILE: cannot read ${urlFile}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
    }
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const key = FLAGS[flag];
    if (key === undefined) {
      problems.push(`unknown argument ${JSON.stringify(flag)} (see --help)`);
      continue;
    }
    const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
    if (value === undefined || (eq < 0 && value.startsWith('--'))) {
      problems.push(`${flag} needs a value`);
      if (value !== undefined) i--;
      continue;
    }
    raw[key] = value;
    source[key] = flag;
    if (key === 'DATABASE_URL' && passwordOf(value) !== '') {
      problems.push(
        `${flag}: a URL with a password is visible in ps; give it in ${ENV_PREFIX}DATABASE_URL or ${ENV_PREFIX}DATABASE_URL_FILE`,
      );
    }
  }
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
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  const c = parsed.data;
  return Object.freeze({
    host: c.HOST,
    port: c.PORT,
    portFile: c.PORT_FILE,
    store: c.STORE,
    dbPath: c.DB_PATH,
    databaseUrl: c.DATABASE_URL,
    databasePoolSize: c.DATABASE_POOL_SIZE,
    synchronous: c.SYNCHRONOUS,
    storeThread: c.STORE_THREAD,
    decisionRetention: c.DECISION_RETENTION,
    bodyLimitBytes: c.BODY_LIMIT_BYTES,
    maxBatchOps: c.MAX_BATCH_OPS,
    shutdownTimeoutMs: c.SHUTDOWN_TIMEOUT_MS,
    logLevel: c.LOG_LEVEL,
    coordinatorKeys: Object.freeze([...c.COORDINATOR_KEYS]),
    readKeys: Object.freeze([...c.READ_KEYS]),
    capabilityKeys: Object.freeze(c.CAPABILITY_KEYS.map((k) => Object.freeze({ ...k }))),
    testSabotage: c.TEST_SABOTAGE,
  });
}

/** The config for logging: secrets replaced by counts and key ids. */
export function redactConfig(config: SinkConfig): Record<string, unknown> {
  const { coordinatorKeys, readKeys, capabilityKeys, databaseUrl, ...rest } = config;
  return {
    ...rest,
    databaseUrl: databaseUrl === undefined ? undefined : redactDatabaseUrl(databaseUrl),
    coordinatorKeys: `${coordinatorKeys.length} key(s)`,
    readKeys: `${readKeys.length} key(s)`,
    capabilityKeyIds: capabilityKeys.map((k) => k.id),
  };
}
