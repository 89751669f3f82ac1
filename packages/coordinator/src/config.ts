/**
 * Coordinator configuration: `loadConfig(env, argv)` is pure. Every option has an environment
 * variable `LEASEHOLD_COORDINATOR_<NAME>` and a flag `--<name>` (flags override env). The result is
 * frozen; any problem (all of them, not the first) is reported in one {@link ConfigError}.
 */
import {
  collectOptions,
  ConfigError,
  deepFreeze,
  parseCapabilityKeys,
  wantsHelp,
  type CapabilityKey,
  type OptionTable,
} from '@leasehold/protocol';
import { z } from 'zod';

export const ENV_PREFIX = 'LEASEHOLD_COORDINATOR_';

export interface CoordinatorConfig {
  /** Unique per process; generated when not set. */
  readonly coordinatorId: string | undefined;
  readonly etcd: {
    readonly endpoints: readonly string[];
    /** Key prefix, always ending in `/`. */
    readonly prefix: string;
    readonly requestTimeoutMs: number;
  };
  readonly http: {
    readonly host: string;
    readonly port: number;
    /** Write the bound port here once listening (for tests and supervisors). */
    readonly portFile: string | undefined;
    readonly maxPayloadBytes: number;
  };
  readonly sink: { readonly url: string; readonly key: string; readonly timeoutMs: number };
  /** The first key signs capabilities. */
  readonly capabilityKeys: readonly CapabilityKey[];
  readonly workerKeys: readonly string[];
  readonly adminKeys: readonly string[];
  readonly sessionTtlMs: number;
  readonly heartbeatIntervalMs: number;
  /** Advance the sink fence to the deletion revision when an owner key disappears by expiry. */
  readonly fenceOnExpiry: boolean;
  /**
   * TEST ONLY. `grant-before-advance` sends each grant first and advances the fence a second
   * later, so the chaos checker can prove it detects the broken order. Refused unless
   * LEASEHOLD_ALLOW_SABOTAGE=1.
   */
  readonly testSabotage: 'grant-before-advance' | undefined;
  /** Refused frames tolerated on one socket before it is closed with 1008. */
  readonly maxBadFrames: number;
  /** Most acquires combined into one etcd transaction and one sink advance-batch. */
  readonly grantBatchMax: number;
  /** `lease.none.retryAfterMs`. */
  readonly noLeaseRetryAfterMs: number;
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

/** Every option, by flag name. */
export const OPTIONS: OptionTable = Object.freeze({
  'coordinator-id': { env: 'COORDINATOR_ID', help: 'unique id of this coordinator (default: generated)' },
  'etcd-endpoints': { env: 'ETCD_ENDPOINTS', help: 'comma-separated etcd URLs (default http://127.0.0.1:2379)' },
  prefix: { env: 'PREFIX', help: 'etcd key prefix (default leasehold/)' },
  'etcd-timeout-ms': { env: 'ETCD_TIMEOUT_MS', help: 'deadline of each etcd request (default 2000)' },
  host: { env: 'HOST', help: 'listen address (default 127.0.0.1)' },
  port: { env: 'PORT', help: 'listen port, 0 = any free port (default 7400)' },
  'port-file': { env: 'PORT_FILE', help: 'write the bound port to this file once listening' },
  'max-payload-bytes': { env: 'MAX_PAYLOAD_BYTES', help: 'largest WebSocket frame / HTTP body (default 1048576)' },
  'sink-url': { env: 'SINK_URL', help: 'base URL of the sink (required)' },
  'sink-key': { env: 'SINK_KEY', help: 'coordinator bearer key at the sink (required)', secret: true },
  'sink-timeout-ms': { env: 'SINK_TIMEOUT_MS', help: 'deadline of each sink request (default 2000)' },
  'capability-keys': { env: 'CAPABILITY_KEYS', help: 'id:secret,... (first signs) (required)', secret: true },
  'worker-keys': { env: 'WORKER_KEYS', help: 'comma-separated worker bearer keys (required)', secret: true },
  'admin-keys': { env: 'ADMIN_KEYS', help: 'comma-separated admin bearer keys (required)', secret: true },
  'session-ttl-ms': { env: 'SESSION_TTL_MS', help: 'session TTL judged by the coordinator (default 10000)' },
  'heartbeat-interval-ms': { env: 'HEARTBEAT_INTERVAL_MS', help: 'heartbeat interval told to workers (<= TTL/3)' },
  'fence-on-expiry': {
    env: 'FENCE_ON_EXPIRY',
    help: 'advance fences when a holder expires (default false)',
    boolean: true,
  },
  'max-bad-frames': { env: 'MAX_BAD_FRAMES', help: 'bad frames before a socket is closed with 1008 (default 10)' },
  'grant-batch-max': { env: 'GRANT_BATCH_MAX', help: 'most grants per etcd txn / sink batch (default 64)' },
  'no-lease-retry-after-ms': { env: 'NO_LEASE_RETRY_AFTER_MS', help: 'retryAfterMs in lease.none (default 500)' },
  'log-level': { env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent (default info)' },
  'test-sabotage': {
    env: 'TEST_SABOTAGE',
    help: 'TEST ONLY: grant-before-advance (needs LEASEHOLD_ALLOW_SABOTAGE=1)',
  },
});

export const HELP_TEXT = [
  'Usage: leasehold-coordinator [--<option> <value>]... [--help]',
  '',
  `Every option can also be set as ${ENV_PREFIX}<ENV>; flags override the environment.`,
  '',
  ...Object.entries(OPTIONS).map(([flag, spec]) => `  --${flag.padEnd(24)} ${spec.env.padEnd(24)} ${spec.help}`),
  '  --help                     print this text',
].join('\n');

const list = (text: string): string[] =>
  text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);

const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const keyList = z
  .string()
  .transform(list)
  .pipe(z.array(z.string().min(16, 'bearer keys must be at least 16 characters')).min(1, 'at least one key'));

const RawSchema = z.object({
  COORDINATOR_ID: z
    .string()
    .regex(/^[A-Za-z0-9._:-]{1,64}$/)
    .optional(),
  ETCD_ENDPOINTS: z
    .string()
    .default('http://127.0.0.1:2379')
    .transform(list)
    .pipe(z.array(z.url({ protocol: /^https?$/ })).min(1, 'at least one endpoint')),
  PREFIX: z
    .string()
    .default('leasehold/')
    .refine((s) => s.length > 0 && !s.includes('\0'), 'must be non-empty')
    .transform((s) => (s.endsWith('/') ? s : `${s}/`)),
  ETCD_TIMEOUT_MS: int(50, 60_000).default(2_000),
  HOST: z.string().min(1).default('127.0.0.1'),
  PORT: int(0, 65_535).default(7_400),
  PORT_FILE: z.string().min(1).optional(),
  MAX_PAYLOAD_BYTES: int(256, 64 * 1024 * 1024).default(1_048_576),
  SINK_URL: z.url({ protocol: /^https?$/ }),
  SINK_KEY: z.string().min(16, 'must be at least 16 characters'),
  SINK_TIMEOUT_MS: int(50, 60_000).default(2_000),
  CAPABILITY_KEYS: z.string().transform((text, ctx) => {
    try {
      const keys = parseCapabilityKeys(text);
      if (keys.length === 0) ctx.addIssue({ code: 'custom', message: 'at least one key' });
      return keys;
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : String(err) });
      return z.NEVER;
    }
  }),
  WORKER_KEYS: keyList,
  ADMIN_KEYS: keyList,
  SESSION_TTL_MS: int(300, 3_600_000).default(10_000),
  HEARTBEAT_INTERVAL_MS: int(10, 1_200_000).optional(),
  FENCE_ON_EXPIRY: z
    .enum(['true', 'false', '1', '0', 'yes', 'no'])
    .default('false')
    .transform((s) => s === 'true' || s === '1' || s === 'yes'),
  MAX_BAD_FRAMES: int(1, 10_000).default(10),
  GRANT_BATCH_MAX: int(1, 1_000).default(64),
  NO_LEASE_RETRY_AFTER_MS: int(0, 600_000).default(500),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TEST_SABOTAGE: z.enum(['grant-before-advance']).optional(),
});

/** Cross-field rules, checked on the raw values so they are reported even when other fields fail. */
function crossFieldProblems(raw: Readonly<Record<string, string>>): string[] {
  const ttl = Number(raw.SESSION_TTL_MS ?? '10000');
  const heartbeat = raw.HEARTBEAT_INTERVAL_MS === undefined ? undefined : Number(raw.HEARTBEAT_INTERVAL_MS);
  if (heartbeat !== undefined && Number.isFinite(heartbeat) && Number.isFinite(ttl) && heartbeat * 3 > ttl) {
    return [`${ENV_PREFIX}HEARTBEAT_INTERVAL_MS: must be <= SESSION_TTL_MS / 3 (${Math.floor(ttl / 3)})`];
  }
  return [];
}

export { wantsHelp };

export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[] = [],
): CoordinatorConfig {
  const { raw, problems } = collectOptions(OPTIONS, ENV_PREFIX, env, argv);
  if (raw.TEST_SABOTAGE !== undefined && env.LEASEHOLD_ALLOW_SABOTAGE !== '1') {
    problems.push(`${ENV_PREFIX}TEST_SABOTAGE: a test-only switch; also set LEASEHOLD_ALLOW_SABOTAGE=1 to use it`);
  }
  const parsed = RawSchema.safeParse(raw);
  problems.push(...crossFieldProblems(raw));
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const key = String(issue.path[0] ?? '');
      problems.push(`${ENV_PREFIX}${key}: ${issue.message}`);
    }
  }
  if (problems.length > 0 || !parsed.success) throw new ConfigError(problems);
  const c = parsed.data;
  const config: CoordinatorConfig = {
    coordinatorId: c.COORDINATOR_ID,
    etcd: { endpoints: Object.freeze(c.ETCD_ENDPOINTS), prefix: c.PREFIX, requestTimeoutMs: c.ETCD_TIMEOUT_MS },
    http: { host: c.HOST, port: c.PORT, portFile: c.PORT_FILE, maxPayloadBytes: c.MAX_PAYLOAD_BYTES },
    sink: { url: c.SINK_URL.replace(/\/+$/, ''), key: c.SINK_KEY, timeoutMs: c.SINK_TIMEOUT_MS },
    capabilityKeys: Object.freeze(c.CAPABILITY_KEYS.map((k) => Object.freeze(k))),
    workerKeys: Object.freeze(c.WORKER_KEYS),
    adminKeys: Object.freeze(c.ADMIN_KEYS),
    sessionTtlMs: c.SESSION_TTL_MS,
    heartbeatIntervalMs: c.HEARTBEAT_INTERVAL_MS ?? Math.max(10, Math.floor(c.SESSION_TTL_MS / 4)),
    fenceOnExpiry: c.FENCE_ON_EXPIRY,
    maxBadFrames: c.MAX_BAD_FRAMES,
    grantBatchMax: c.GRANT_BATCH_MAX,
    noLeaseRetryAfterMs: c.NO_LEASE_RETRY_AFTER_MS,
    logLevel: c.LOG_LEVEL,
    testSabotage: c.TEST_SABOTAGE,
  };
  return deepFreeze(config);
}

/** The config with secrets replaced, for the one start-up log line. */
export function redactConfig(config: CoordinatorConfig): Record<string, unknown> {
  return {
    ...config,
    sink: { ...config.sink, key: '[redacted]' },
    capabilityKeys: config.capabilityKeys.map((k) => ({ id: k.id, secret: '[redacted]' })),
    workerKeys: `[${config.workerKeys.length} redacted]`,
    adminKeys: `[${config.adminKeys.length} redacted]`,
  };
}
