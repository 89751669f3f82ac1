#!/usr/bin/env node
/**
 * The leasehold-sink daemon: the only file that reads process.env / argv and the certificate
 * files (HTTPS, and those the PostgreSQL URL names); the process around it (root logger, signals,
 * exit codes) is the daemon kit's `runMain`.
 *
 * Start-up prints one JSON log line `{"msg":"listening","host":...,"port":N}` and, with
 * `--port-file PATH`, writes the bound port to PATH (atomically) so tests can use `--port 0`.
 * SIGTERM / SIGINT: stop accepting, finish the in-flight batch, close the database, exit 0 (a
 * shutdown longer than shutdown-timeout-ms + 10 s exits 1). SIGHUP: read the TLS certificate and
 * key again (open connections stay). Exit codes: 0 clean stop, --help, --version or
 * --check-config; 1 start-up failure (e.g. newer schema); 2 bad configuration.
 */
import { readFileSync } from 'node:fs';
import { packageVersion, readTlsFiles, runMain, writePortFile, type DaemonDefinition } from '@leasehold/daemon-kit';
import { HELP_TEXT, loadConfig, redactConfig, type SinkConfig } from './config.js';
import { SchemaVersionError } from './errors.js';
import { createSink } from './sink.js';
import { connectionTls } from './store/postgres-tls.js';

const readText = (path: string): string => readFileSync(path, 'utf8');
const readBytes = (path: string): Buffer => readFileSync(path);

const sink: DaemonDefinition<SinkConfig> = {
  name: 'leasehold-sink',
  version: packageVersion(import.meta.url),
  help: HELP_TEXT,
  loadConfig: (env, argv, readFile) => loadConfig(env, argv, { readFile }),
  redactConfig,
  logLevel: (config) => config.logLevel,
  logRedact: {
    paths: ['req.headers.authorization', 'capability', '*.capability', 'payload', '*.payload'],
    remove: true,
  },
  tracing: (config) => ({ config: config.tracing }),
  // The sink closes lingering connections itself at shutdown-timeout-ms; this is the backstop.
  forceExitAfterMs: (config) => config.shutdownTimeoutMs + 10_000,
  describeStartFailure: (err) =>
    err instanceof SchemaVersionError ? 'database schema is newer than this build' : 'start-up failed',
  start: async (config, { logger }) => {
    if (config.testSabotage !== undefined) {
      logger.warn({ sabotage: config.testSabotage }, 'TEST SABOTAGE ACTIVE: this sink breaks its own guarantees');
    }
    const tls = config.tls;
    const readTls = () => (tls === undefined ? undefined : readTlsFiles(tls, readBytes));
    const https = readTls();
    const database =
      config.store === 'postgres' && config.databaseUrl !== undefined
        ? connectionTls(config.databaseUrl, readText)
        : undefined;
    const started = await createSink(config, {
      logger,
      ...(https === undefined ? {} : { tls: https }),
      ...(database === undefined ? {} : { database }),
    });
    const address = started.address;
    if (address === null) throw new Error('sink is not listening');
    logger.info({ host: address.host, port: address.port }, 'listening');
    if (config.portFile !== undefined) writePortFile(config.portFile, address.port);
    return {
      reloadTls: () => {
        const material = readTls();
        if (material !== undefined) started.reloadTls(material);
      },
      close: () => started.close(),
    };
  },
};

runMain(sink, process, { readFile: readText });
