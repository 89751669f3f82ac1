#!/usr/bin/env node
/**
 * `leasehold-coordinator`: the only file that reads process.env / argv and the certificate files;
 * the process around it (root logger, signals, exit codes) is the daemon kit's `runMain`.
 * SIGTERM / SIGINT: graceful shutdown (workers are sent "going away" and move to a peer; their
 * sessions are not revoked), then exit 0; a shutdown longer than 10 s exits 1. SIGHUP: read the
 * TLS certificate and key again (open connections and sessions stay). Exit codes: 0 clean stop,
 * --help, --version, --check-config; 1 start-up failure; 2 bad configuration.
 */
import { readFileSync } from 'node:fs';
import { packageVersion, runMain, type DaemonDefinition } from '@leasehold/daemon-kit';
import { HELP_TEXT, loadConfig, redactConfig, type CoordinatorConfig } from './config.js';
import { createCoordinator } from './index.js';

const readBytes = (path: string): Buffer => readFileSync(path);

const coordinator: DaemonDefinition<CoordinatorConfig> = {
  name: 'leasehold-coordinator',
  version: packageVersion(import.meta.url),
  help: HELP_TEXT,
  loadConfig,
  redactConfig,
  logLevel: (config) => config.logLevel,
  logRedact: { paths: ['req.headers.authorization', '*.capability', 'capability'], censor: '[redacted]' },
  tracing: (config) => ({ config: config.tracing, instanceId: config.coordinatorId }),
  forceExitAfterMs: () => 10_000,
  start: async (config, { logger }) => {
    if (config.testSabotage !== undefined) {
      logger.warn(
        { sabotage: config.testSabotage },
        'TEST SABOTAGE ACTIVE: this coordinator breaks its own guarantees',
      );
    }
    // Every certificate file is read through readBytes, at start and again on SIGHUP.
    const started = await createCoordinator(config, { logger, defaultMetrics: true, readFile: readBytes });
    return {
      reloadTls: () => {
        started.reloadTls();
      },
      close: () => started.close(),
    };
  },
};

runMain(coordinator, process, { readFile: (path) => readFileSync(path, 'utf8') });
