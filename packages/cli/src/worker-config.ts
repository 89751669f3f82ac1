/**
 * Worker CLI configuration: `LEASEHOLD_WORKER_<ENV>` or `--<flag>` (flags win). Pure: returns a
 * frozen config or throws one ConfigError listing every problem.
 */
import {
  collectOptions,
  ConfigError,
  deepFreeze,
  formatHelp,
  splitList,
  TRACING_OPTIONS,
  TRACING_RAW_SHAPE,
  tracingConfigOf,
  tracingProblems,
  WorkerIdSchema,
  DEFAULT_QUEUE,
  MAX_SESSION_QUEUES,
  QueueNameSchema,
  type OptionTable,
  type TracingConfig,
} from '@leasehold/protocol';
import { refuseUnusableBaseUrl } from '@leasehold/sink-client';
import { z } from 'zod';

export const ENV_PREFIX = 'LEASEHOLD_WORKER_';

export const OPTIONS: OptionTable = Object.freeze({
  coordinators: { env: 'COORDINATORS', help: 'comma-separated coordinator URLs, tried in turn (required)' },
  'sink-url': { env: 'SINK_URL', help: 'base URL of the sink (required)' },
  'worker-id': { env: 'WORKER_ID', help: "this worker's id (required with a credential; default: generated)" },
  'key-id': { env: 'KEY_ID', help: "the id of this worker's own credential" },
  secret: { env: 'SECRET', help: "the secret of this worker's own credential", secret: true },
  'worker-key': { env: 'WORKER_KEY', help: 'INSECURE dev mode: a shared worker key', secret: true },
  ca: { env: 'CA', help: "CA file (PEM) that issued the coordinators' and the sink's certificates (pinned)" },
  'tls-cert': { env: 'TLS_CERT', help: 'client certificate file (PEM) for mTLS (CN = worker id)' },
  'tls-key': { env: 'TLS_KEY', help: 'its private key file (PEM)' },
  queues: {
    env: 'QUEUES',
    help: `comma-separated queues this worker serves (1-${MAX_SESSION_QUEUES}); tasks submitted without a queue are in 'default'`,
    default: DEFAULT_QUEUE,
  },
  concurrency: { env: 'CONCURRENCY', help: 'tasks run at once', default: '1' },
  handler: { env: 'HANDLER', help: "'demo' or the path of an ES module exporting `handler`", default: 'demo' },
  'demo-duration-ms': { env: 'DEMO_DURATION_MS', help: 'demo handler: how long each task computes', default: '200' },
  'demo-nondeterministic': {
    env: 'DEMO_NONDETERMINISTIC',
    help: 'demo handler: add a random nonce to each result',
    boolean: true,
    default: 'false',
  },
  'shutdown-grace-ms': {
    env: 'SHUTDOWN_GRACE_MS',
    help: 'on SIGTERM, time to finish tasks before their signals are aborted and their leases released',
    default: '10000',
  },
  'shutdown-force-ms': {
    env: 'SHUTDOWN_FORCE_MS',
    help: 'then, how much longer to wait for handlers that ignore the abort before releasing anyway and exiting',
    default: '5000',
  },
  'capability-public-keys': {
    env: 'CAPABILITY_PUBLIC_KEYS',
    help: "the coordinators' capability public keys (id:<key>,...; the sink's CAPABILITY_PUBLIC_KEYS), for handlers that use ctx.fencedTransaction",
    fromFile: true,
  },
  'http-port': {
    env: 'HTTP_PORT',
    help: 'serve /healthz, /readyz and /metrics on this port (loopback unless --http-host); off by default',
  },
  'http-host': { env: 'HTTP_HOST', help: 'listen address of the health/metrics port', default: '127.0.0.1' },
  ...TRACING_OPTIONS,
  'log-level': { env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent', default: 'info' },
  pretty: { env: 'PRETTY', help: 'human-readable logs (default: when stdout is a TTY)', boolean: true },
});

export const HELP_TEXT = formatHelp(
  'leasehold-worker: runs tasks leased from the leasehold coordinators and writes results to the sink.',
  'leasehold-worker',
  OPTIONS,
  ENV_PREFIX,
);

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((s) => s === 'true' || s === '1' || s === 'yes');
const int = (min: number, max: number) =>
  z
    .string()
    .regex(/^[0-9]+$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max));

const RawSchema = z.object({
  COORDINATORS: z
    .string({ error: 'is required' })
    .transform(splitList)
    .pipe(z.array(z.url({ protocol: /^(https?|wss?)$/ })).min(1, 'at least one URL')),
  SINK_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).superRefine(refuseUnusableBaseUrl),
  WORKER_KEY: z.string().min(16, 'must be at least 16 characters').optional(),
  KEY_ID: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 chars of [A-Za-z0-9_-]')
    .optional(),
  SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  WORKER_ID: WorkerIdSchema.optional(),
  CA: z.string().min(1).optional(),
  TLS_CERT: z.string().min(1).optional(),
  TLS_KEY: z.string().min(1).optional(),
  QUEUES: z
    .string()
    .transform(splitList)
    .pipe(
      z
        .array(QueueNameSchema)
        .min(1, 'at least one queue')
        .max(MAX_SESSION_QUEUES, `at most ${MAX_SESSION_QUEUES} queues`),
    ),
  CONCURRENCY: int(1, 1_000),
  HANDLER: z.string().min(1),
  DEMO_DURATION_MS: int(0, 3_600_000),
  DEMO_NONDETERMINISTIC: bool,
  SHUTDOWN_GRACE_MS: int(0, 3_600_000),
  SHUTDOWN_FORCE_MS: int(0, 3_600_000),
  CAPABILITY_PUBLIC_KEYS: z.string().min(1).optional(),
  HTTP_PORT: int(0, 65_535).optional(),
  HTTP_HOST: z.string().min(1),
  ...TRACING_RAW_SHAPE,
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  PRETTY: bool.optional(),
});

export interface WorkerConfig {
  readonly coordinators: readonly string[];
  readonly sinkUrl: string;
  /** The worker's own credential, a client certificate, or the insecure shared key. */
  readonly credentials:
    | { readonly keyId: string; readonly secret: string }
    | { readonly certificate: true }
    | { readonly workerKey: string };
  readonly tls: { readonly caFile?: string; readonly certFile?: string; readonly keyFile?: string };
  readonly workerId: string | undefined;
  /** The queues served (`--queues`, default `default`). */
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly handler: string;
  readonly demo: { readonly durationMs: number; readonly nondeterministic: boolean };
  readonly shutdownGraceMs: number;
  readonly shutdownForceMs: number;
  /** For `ctx.fencedTransaction` (the env form `id:<key>,…`; checked by the SDK). */
  readonly capabilityPublicKeys: string | undefined;
  /** Health/readiness/metrics endpoint; undefined = off. */
  readonly http: { readonly host: string; readonly port: number } | undefined;
  /** OpenTelemetry: off by default (the SDK is loaded only when on). */
  readonly tracing: TracingConfig;
  readonly logLevel: string;
  readonly pretty: boolean | undefined;
}

export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[] = [],
  readFile?: (path: string) => string,
): WorkerConfig {
  const { raw, problems, origin } = collectOptions(OPTIONS, ENV_PREFIX, {
    env,
    argv,
    ...(readFile === undefined ? {} : { readFile }),
  });
  const parsed = RawSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? '');
      problems.push(`${origin[key] ?? `${ENV_PREFIX}${key}`}: ${issue.message}`);
    }
  }
  const own = raw.KEY_ID !== undefined || raw.SECRET !== undefined;
  const cert = raw.TLS_CERT !== undefined;
  if (own && (raw.KEY_ID === undefined || raw.SECRET === undefined)) {
    problems.push(`${ENV_PREFIX}KEY_ID / SECRET: give both (the worker's own credential)`);
  }
  if ((own || cert) && raw.WORKER_ID === undefined) {
    problems.push(`${ENV_PREFIX}WORKER_ID: required with a credential or certificate (it is bound to one worker id)`);
  }
  if (!own && !cert && raw.WORKER_KEY === undefined) {
    problems.push(
      `${ENV_PREFIX}KEY_ID and ${ENV_PREFIX}SECRET (or _FILE): required — or a client certificate (TLS_CERT, TLS_KEY), ` +
        `or WORKER_KEY for the insecure shared-key dev mode`,
    );
  }
  if ((raw.TLS_CERT === undefined) !== (raw.TLS_KEY === undefined)) {
    problems.push(`${ENV_PREFIX}TLS_CERT / TLS_KEY: give both or neither`);
  }
  problems.push(...tracingProblems(raw, ENV_PREFIX));
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  const c = parsed.data;
  const credentials: WorkerConfig['credentials'] =
    c.KEY_ID !== undefined && c.SECRET !== undefined
      ? { keyId: c.KEY_ID, secret: c.SECRET }
      : c.TLS_CERT !== undefined
        ? { certificate: true }
        : { workerKey: c.WORKER_KEY ?? '' };
  return deepFreeze({
    coordinators: c.COORDINATORS.map((u) => u.replace(/^ws/, 'http').replace(/\/+$/, '')),
    sinkUrl: c.SINK_URL.replace(/\/+$/, ''),
    credentials,
    tls: {
      ...(c.CA === undefined ? {} : { caFile: c.CA }),
      ...(c.TLS_CERT === undefined ? {} : { certFile: c.TLS_CERT }),
      ...(c.TLS_KEY === undefined ? {} : { keyFile: c.TLS_KEY }),
    },
    workerId: c.WORKER_ID,
    queues: [...new Set(c.QUEUES)],
    concurrency: c.CONCURRENCY,
    handler: c.HANDLER,
    demo: { durationMs: c.DEMO_DURATION_MS, nondeterministic: c.DEMO_NONDETERMINISTIC },
    shutdownGraceMs: c.SHUTDOWN_GRACE_MS,
    shutdownForceMs: c.SHUTDOWN_FORCE_MS,
    capabilityPublicKeys: c.CAPABILITY_PUBLIC_KEYS,
    http: c.HTTP_PORT === undefined ? undefined : { host: c.HTTP_HOST, port: c.HTTP_PORT },
    tracing: tracingConfigOf(c),
    logLevel: c.LOG_LEVEL,
    pretty: c.PRETTY,
  });
}

export function redactConfig(config: WorkerConfig): Record<string, unknown> {
  const c = config.credentials;
  return {
    ...config,
    credentials:
      'keyId' in c ? { keyId: c.keyId, secret: '[redacted]' } : 'workerKey' in c ? { workerKey: '[redacted]' } : c,
  };
}
