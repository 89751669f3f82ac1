#!/usr/bin/env node
/**
 * leasehold-worker: runs a handler module (or the built-in demo) against the coordinators and the
 * sink. The only file of the worker CLI that reads process.env and handles signals.
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { createRequire } from 'node:module';
import { ConfigError, wantsCheckConfig, wantsHelp, wantsVersion } from '@leasehold/protocol';
import { startWorkerHttp } from './worker-http.js';
import { HELP_TEXT, loadConfig, redactConfig, type WorkerConfig } from './worker-config.js';
import { createDemoHandler } from './demo-handler.js';
import { FatalWorkerError, Worker, type PayloadSchema, type TaskHandler, type WorkerOptions } from '@leasehold/worker';
import { startTracing } from '@leasehold/telemetry';

interface HandlerModule {
  readonly handler: TaskHandler<unknown, unknown>;
  readonly payload?: PayloadSchema;
  readonly beforeWrite?: WorkerOptions['beforeWrite'];
}

/**
 * The handler module: exports `handler` (or a default function), and optionally `payload` (a
 * Standard Schema the worker validates each payload with) and `beforeWrite` (a hook for tests).
 */
async function loadHandler(config: WorkerConfig): Promise<HandlerModule> {
  if (config.handler === 'demo') return { handler: createDemoHandler(config.demo) as TaskHandler<unknown, unknown> };
  const mod = (await import(pathToFileURL(resolve(config.handler)).href)) as {
    handler?: unknown;
    default?: unknown;
    payload?: unknown;
    beforeWrite?: unknown;
  };
  const handler = mod.handler ?? mod.default;
  if (typeof handler !== 'function')
    throw new ConfigError([`${config.handler} exports no function \`handler\` (or default)`]);
  return {
    handler: handler as TaskHandler<unknown, unknown>,
    ...(mod.payload === undefined ? {} : { payload: mod.payload as PayloadSchema }),
    ...(typeof mod.beforeWrite === 'function' ? { beforeWrite: mod.beforeWrite as WorkerOptions['beforeWrite'] } : {}),
  };
}

function makeLogger(config: WorkerConfig): Logger {
  const pretty = config.pretty ?? process.stdout.isTTY;
  return pino({
    level: config.logLevel,
    base: { service: 'leasehold-worker', pid: process.pid },
    ...(pretty
      ? {
          transport: {
            target: 'pino-pretty',
            options: { colorize: process.stdout.isTTY, translateTime: 'HH:MM:ss.l' },
          },
        }
      : {}),
  });
}

/** Exit status of a configuration error (as the coordinator and the sink): supervisors should not restart on it. */
const EXIT_CONFIG = 2;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (wantsHelp(argv)) {
    console.log(HELP_TEXT);
    return;
  }
  const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
  if (wantsVersion(argv)) {
    console.log(`leasehold-worker ${pkg.version}`);
    return;
  }
  let config: WorkerConfig;
  try {
    config = loadConfig(process.env, argv, (path) => readFileSync(path, 'utf8'));
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exitCode = EXIT_CONFIG;
      return;
    }
    throw err;
  }
  if (wantsCheckConfig(argv)) {
    console.log(`${JSON.stringify(redactConfig(config), null, 2)}\nconfiguration OK`);
    return;
  }
  const logger = makeLogger(config);
  logger.info({ config: redactConfig(config) }, 'starting');
  // Before the handler module loads: its own spans (and the SDK's) need the provider registered.
  const tracing = await startTracing(config.tracing, {
    name: 'leasehold-worker',
    version: pkg.version,
    ...(config.workerId === undefined ? {} : { instanceId: config.workerId }),
  });
  if (tracing.enabled) logger.info({ tracing: config.tracing }, 'tracing on');
  const stopTracing = (): Promise<void> =>
    tracing.shutdown().catch((err: unknown) => {
      logger.warn({ err }, 'tracing shutdown failed; spans may be lost');
    });
  const { handler, payload, beforeWrite } = await loadHandler(config);
  const tls = {
    ...(config.tls.caFile === undefined ? {} : { ca: readFileSync(config.tls.caFile) }),
    ...(config.tls.certFile === undefined ? {} : { cert: readFileSync(config.tls.certFile) }),
    ...(config.tls.keyFile === undefined ? {} : { key: readFileSync(config.tls.keyFile) }),
  };
  if ('workerKey' in config.credentials) {
    logger.warn('INSECURE: a shared worker key; any holder of it may act as any worker');
  }
  const worker = new Worker<unknown, unknown>({
    coordinators: config.coordinators,
    sink: { url: config.sinkUrl },
    credentials: config.credentials,
    ...(Object.keys(tls).length === 0 ? {} : { tls }),
    handler,
    ...(payload === undefined ? {} : { payload }),
    queues: config.queues,
    concurrency: config.concurrency,
    logger,
    ...(config.workerId === undefined ? {} : { workerId: config.workerId }),
    ...(config.capabilityPublicKeys === undefined ? {} : { capabilityPublicKeys: config.capabilityPublicKeys }),
    ...(beforeWrite === undefined ? {} : { beforeWrite }),
    // SIGTERM / SIGINT: stop acquiring, let in-flight tasks finish for the grace time, then abort
    // and release them; `run()` resolves once the worker is closed.
    shutdown: { graceMs: config.shutdownGraceMs, forceMs: config.shutdownForceMs, signals: ['SIGTERM', 'SIGINT'] },
  });
  logger.info({ workerId: worker.workerId, incarnation: worker.incarnation }, 'worker started');
  const done = worker.run();
  if (config.http !== undefined) {
    const server = await startWorkerHttp(worker, config.http);
    const bound = server.address();
    logger.info({ port: typeof bound === 'object' && bound !== null ? bound.port : undefined }, 'health endpoint');
    server.unref();
  }
  try {
    await done;
  } catch (err) {
    // Every coordinator refused the credential or the protocol version: a configuration error;
    // restarting cannot fix it. The code is in this, the last line.
    await stopTracing();
    if (err instanceof FatalWorkerError) {
      logger.fatal(
        { code: err.code },
        `${err.message} (LEASEHOLD_WORKER_KEY_ID / LEASEHOLD_WORKER_SECRET, or TLS_CERT for mTLS)`,
      );
    } else logger.fatal({ err }, 'worker failed');
    logger.flush();
    process.exit(EXIT_CONFIG);
  }
  await stopTracing();
  logger.info({ stats: worker.stats }, 'stopped');
  logger.flush();
  process.exit(0);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
