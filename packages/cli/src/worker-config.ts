/**
 * Worker CLI configuration: `LEASEHOLD_WORKER_<ENV>` or `--<flag>` (flags win). Pure: returns a
 * frozen config or throws one ConfigError listing every problem.
 */
import {
  collectOptions,
  ConfigError,
  deepFreeze,
  formatOptionsHelp,
  splitList,
  WorkerIdSchema,
  type OptionTable,
} from '@leasehold/protocol';
import { z } from 'zod';

export const ENV_PREFIX = 'LEASEHOLD_WORKER_';

export const OPTIONS: OptionTable = Object.freeze({
  coordinators: { env: 'COORDINATORS', help: 'comma-separated coordinator URLs, tried in turn (required)' },
  'sink-url': { env: 'SINK_URL', help: 'base URL of the sink (required)' },
  'worker-key': { env: 'WORKER_KEY', help: 'bearer key for the coordinators (required)', secret: true },
  'worker-id': { env: 'WORKER_ID', help: 'stable worker id (default: generated)' },
  concurrency: { env: 'CONCURRENCY', help: 'tasks run at once (default 1)' },
  handler: { env: 'HANDLER', help: "'demo' or the path of an ES module exporting `handler` (default demo)" },
  'demo-duration-ms': { env: 'DEMO_DURATION_MS', help: 'demo handler: how long each task computes (default 200)' },
  'demo-nondeterministic': {
    env: 'DEMO_NONDETERMINISTIC',
    help: 'demo handler: add a random nonce to each result (default false)',
    boolean: true,
  },
  'shutdown-grace-ms': {
    env: 'SHUTDOWN_GRACE_MS',
    help: 'on SIGTERM, time to finish tasks before releasing (default 10000)',
  },
  'log-level': { env: 'LOG_LEVEL', help: 'fatal|error|warn|info|debug|trace|silent (default info)' },
  pretty: { env: 'PRETTY', help: 'human-readable logs (default: when stdout is a TTY)', boolean: true },
});

export const HELP_TEXT = [
  'leasehold-worker: runs tasks leased from the leasehold coordinators and writes results to the sink.',
  '',
  'Usage: leasehold-worker [--<option> <value>]... [--help]',
  '',
  formatOptionsHelp(OPTIONS, ENV_PREFIX),
  '  --help                       print this text',
].join('\n');

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
  SINK_URL: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }),
  WORKER_KEY: z.string({ error: 'is required' }).min(16, 'must be at least 16 characters'),
  WORKER_ID: WorkerIdSchema.optional(),
  CONCURRENCY: int(1, 1_000).default(1),
  HANDLER: z.string().min(1).default('demo'),
  DEMO_DURATION_MS: int(0, 3_600_000).default(200),
  DEMO_NONDETERMINISTIC: bool.default(false),
  SHUTDOWN_GRACE_MS: int(0, 3_600_000).default(10_000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  PRETTY: bool.optional(),
});

export interface WorkerConfig {
  readonly coordinators: readonly string[];
  readonly sinkUrl: string;
  readonly workerKey: string;
  readonly workerId: string | undefined;
  readonly concurrency: number;
  readonly handler: string;
  readonly demo: { readonly durationMs: number; readonly nondeterministic: boolean };
  readonly shutdownGraceMs: number;
  readonly logLevel: string;
  readonly pretty: boolean | undefined;
}

export function loadConfig(
  env: Readonly<Record<string, string | undefined>>,
  argv: readonly string[] = [],
): WorkerConfig {
  const { raw, problems } = collectOptions(OPTIONS, ENV_PREFIX, env, argv);
  const parsed = RawSchema.safeParse(raw);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      problems.push(`${ENV_PREFIX}${String(issue.path[0] ?? '')}: ${issue.message}`);
  }
  if (!parsed.success || problems.length > 0) throw new ConfigError(problems);
  const c = parsed.data;
  return deepFreeze({
    coordinators: c.COORDINATORS.map((u) => u.replace(/^ws/, 'http').replace(/\/+$/, '')),
    sinkUrl: c.SINK_URL.replace(/\/+$/, ''),
    workerKey: c.WORKER_KEY,
    workerId: c.WORKER_ID,
    concurrency: c.CONCURRENCY,
    handler: c.HANDLER,
    demo: { durationMs: c.DEMO_DURATION_MS, nondeterministic: c.DEMO_NONDETERMINISTIC },
    shutdownGraceMs: c.SHUTDOWN_GRACE_MS,
    logLevel: c.LOG_LEVEL,
    pretty: c.PRETTY,
  });
}

export function redactConfig(config: WorkerConfig): Record<string, unknown> {
  return { ...config, workerKey: '[redacted]' };
}
