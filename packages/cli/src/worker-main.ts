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
import { startWorker, type TaskHandler, type WorkerOptions } from '@leasehold/worker';

async function loadHandler(
  config: WorkerConfig,
): Promise<{ handler: TaskHandler; beforeWrite?: WorkerOptions['beforeWrite'] }> {
  if (config.handler === 'demo') return { handler: createDemoHandler(config.demo) };
  const mod = (await import(pathToFileURL(resolve(config.handler)).href)) as {
    handler?: unknown;
    default?: unknown;
    beforeWrite?: unknown;
  };
  const handler = mod.handler ?? mod.default;
  if (typeof handler !== 'function')
    throw new ConfigError([`${config.handler} exports no function \`handler\` (or default)`]);
  return {
    handler: handler as TaskHandler,
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
  if (wantsVersion(argv)) {
    const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
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
  const { handler, beforeWrite } = await loadHandler(config);
  const tls = {
    ...(config.tls.caFile === undefined ? {} : { ca: readFileSync(config.tls.caFile) }),
    ...(config.tls.certFile === undefined ? {} : { cert: readFileSync(config.tls.certFile) }),
    ...(config.tls.keyFile === undefined ? {} : { key: readFileSync(config.tls.keyFile) }),
  };
  if ('workerKey' in config.credentials) {
    logger.warn('INSECURE: a shared worker key; any holder of it may act as any worker');
  }
  const worker = startWorker({
    coordinators: config.coordinators,
    sink: { url: config.sinkUrl },
    credentials: config.credentials,
    ...(Object.keys(tls).length === 0 ? {} : { tls }),
    handler,
    concurrency: config.concurrency,
    logger,
    ...(config.workerId === undefined ? {} : { workerId: config.workerId }),
    ...(beforeWrite === undefined ? {} : { beforeWrite }),
  });
  logger.info({ workerId: worker.workerId, incarnation: worker.incarnation }, 'worker started');
  if (config.http !== undefined) {
    const server = await startWorkerHttp(worker, config.http);
    const bound = server.address();
    logger.info({ port: typeof bound === 'object' && bound !== null ? bound.port : undefined }, 'health endpoint');
    server.unref();
  }
  worker.on('fatal', (event) => {
    // Credentials every coordinator refuses: a configuration error; restarting cannot fix it.
    logger.fatal(
      { code: event.code },
      `${event.message} (LEASEHOLD_WORKER_KEY_ID / LEASEHOLD_WORKER_SECRET, or TLS_CERT for mTLS)`,
    );
    logger.flush();
    process.exit(EXIT_CONFIG);
  });
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: finishing or releasing in-flight tasks');
    worker.close(config.shutdownGraceMs).then(
      () => {
        logger.info({ stats: worker.stats }, 'stopped');
        logger.flush();
        process.exit(0);
      },
      (err: unknown) => {
        logger.fatal({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => {
    stop('SIGTERM');
  });
  process.on('SIGINT', () => {
    stop('SIGINT');
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
