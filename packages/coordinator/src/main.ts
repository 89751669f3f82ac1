#!/usr/bin/env node
/**
 * `leasehold-coordinator`: the only file that reads process.env / argv, builds the root logger and
 * handles signals. SIGTERM / SIGINT: graceful shutdown (workers are sent "going away" and move to
 * a peer; their sessions are not revoked), then exit 0. SIGHUP: read the TLS certificate and key
 * again (open connections and sessions stay). Exit codes: 0 clean stop, --help, --version,
 * --check-config; 1 start-up failure; 2 bad configuration.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { wantsCheckConfig, wantsVersion } from '@leasehold/protocol';
import { startTracing } from '@leasehold/telemetry';
import { pino } from 'pino';
import { ConfigError, LeaseholdError } from './errors.js';
import { createCoordinator, HELP_TEXT, loadConfig, redactConfig } from './index.js';
import { wantsHelp } from './config.js';

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (wantsHelp(argv)) {
    process.stdout.write(`${HELP_TEXT}\n`);
    return 0;
  }
  const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
  if (wantsVersion(argv)) {
    process.stdout.write(`leasehold-coordinator ${pkg.version}\n`);
    return 0;
  }
  let config;
  try {
    config = loadConfig(process.env, argv, (path) => readFileSync(path, 'utf8'));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n\nRun with --help for the options.\n`);
      return 2;
    }
    throw err;
  }
  if (wantsCheckConfig(argv)) {
    process.stdout.write(`${JSON.stringify(redactConfig(config), null, 2)}\nconfiguration OK\n`);
    return 0;
  }
  const logger = pino({
    level: config.logLevel,
    base: { service: 'leasehold-coordinator', pid: process.pid },
    redact: { paths: ['req.headers.authorization', '*.capability', 'capability'], censor: '[redacted]' },
  });
  logger.info({ config: redactConfig(config) }, 'configuration resolved');
  if (config.testSabotage !== undefined) {
    logger.warn({ sabotage: config.testSabotage }, 'TEST SABOTAGE ACTIVE: this coordinator breaks its own guarantees');
  }
  // Before the coordinator exists: its spans need the SDK registered (tracing off: nothing loaded).
  const tracing = await startTracing(config.tracing, {
    name: 'leasehold-coordinator',
    version: pkg.version,
    ...(config.coordinatorId === undefined ? {} : { instanceId: config.coordinatorId }),
  });
  if (tracing.enabled) logger.info({ tracing: config.tracing }, 'tracing on');
  const coordinator = await createCoordinator(config, { logger, defaultMetrics: true });

  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      logger.info({ signal }, 'signal received');
      resolve();
    };
    process.once('SIGTERM', () => {
      stop('SIGTERM');
    });
    process.once('SIGINT', () => {
      stop('SIGINT');
    });
    process.on('SIGHUP', () => {
      try {
        coordinator.reloadTls();
      } catch (err) {
        logger.error({ err }, 'tls reload failed; the previous certificates stay in use');
      }
    });
  });
  const force = setTimeout(() => {
    logger.fatal('shutdown took too long, exiting');
    process.exit(1);
  }, 10_000);
  force.unref();
  await coordinator.close();
  await tracing.shutdown().catch((err: unknown) => {
    logger.warn({ err }, 'tracing shutdown failed; spans may be lost');
  });
  return 0;
}

main().then(
  (code) => {
    process.exit(code);
  },
  (err: unknown) => {
    const code = err instanceof LeaseholdError ? err.code : 'INTERNAL';
    process.stderr.write(`leasehold-coordinator failed to start (${code}): ${String(err)}\n`);
    process.exit(1);
  },
);
