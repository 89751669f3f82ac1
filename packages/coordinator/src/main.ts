#!/usr/bin/env node
/**
 * `leasehold-coordinator`: the only file that reads process.env / argv, builds the root logger and
 * handles signals. SIGTERM / SIGINT: graceful shutdown (workers are sent "going away" and move to
 * a peer; their sessions are not revoked), then exit 0.
 */
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
  let config;
  try {
    config = loadConfig(process.env, argv);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n\nRun with --help for the options.\n`);
      return 2;
    }
    throw err;
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
  });
  const force = setTimeout(() => {
    logger.fatal('shutdown took too long, exiting');
    process.exit(1);
  }, 10_000);
  force.unref();
  await coordinator.close();
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
