#!/usr/bin/env node
/**
 * The leasehold-sink daemon. The only file that reads process.env / argv, builds the root logger
 * and handles signals.
 *
 * Start-up prints one JSON log line `{"msg":"listening","host":...,"port":N}` and, with
 * `--port-file PATH`, writes the bound port to PATH (atomically) so tests can use `--port 0`.
 * SIGTERM / SIGINT: stop accepting, finish the in-flight batch, close the database, exit 0.
 * SIGHUP: read the TLS certificate and key again (open connections stay).
 * Exit codes: 0 clean stop, --help, --version or --check-config; 1 start-up failure (e.g. newer
 * schema); 2 bad configuration.
 */
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { wantsCheckConfig, wantsVersion } from '@leasehold/protocol';
import { startTracing } from '@leasehold/telemetry';
import pino from 'pino';
import { HELP_TEXT, loadConfig, redactConfig, wantsHelp, type SinkConfig } from './config.js';
import { ConfigError, SchemaVersionError } from './errors.js';
import { createSink } from './sink.js';

function writePortFile(path: string, port: number): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${port}\n`);
  renameSync(tmp, path);
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  if (wantsHelp(argv)) {
    process.stdout.write(HELP_TEXT);
    return 0;
  }
  const pkg = createRequire(import.meta.url)('../package.json') as { version: string };
  if (wantsVersion(argv)) {
    process.stdout.write(`leasehold-sink ${pkg.version}\n`);
    return 0;
  }
  let config: SinkConfig;
  try {
    config = loadConfig(process.env, argv, { readFile: (path) => readFileSync(path, 'utf8') });
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`leasehold-sink: ${err.message}\n`);
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
    base: { service: 'leasehold-sink', pid: process.pid },
    redact: {
      paths: ['req.headers.authorization', 'capability', '*.capability', 'payload', '*.payload'],
      remove: true,
    },
  });
  logger.info({ config: redactConfig(config) }, 'starting');
  if (config.testSabotage !== undefined) {
    logger.warn({ sabotage: config.testSabotage }, 'TEST SABOTAGE ACTIVE: this sink breaks its own guarantees');
  }

  // Before the sink exists: its spans need the SDK registered (tracing off: nothing loaded).
  const tracing = await startTracing(config.tracing, { name: 'leasehold-sink', version: pkg.version });
  if (tracing.enabled) logger.info({ tracing: config.tracing }, 'tracing on');
  const stopTracing = (): Promise<void> =>
    tracing.shutdown().catch((err: unknown) => {
      logger.warn({ err }, 'tracing shutdown failed; spans may be lost');
    });

  let sink;
  try {
    sink = await createSink(config, { logger });
  } catch (err) {
    const message = err instanceof SchemaVersionError ? 'database schema is newer than this build' : 'start-up failed';
    logger.fatal({ err }, message);
    process.stderr.write(`leasehold-sink: ${message}: ${err instanceof Error ? err.message : String(err)}\n`);
    await stopTracing();
    return 1;
  }
  const address = sink.address;
  if (address === null) throw new Error('sink is not listening');
  logger.info({ host: address.host, port: address.port }, 'listening');
  if (config.portFile !== undefined) writePortFile(config.portFile, address.port);

  return new Promise<number>((resolve) => {
    let stopping = false;
    const stop = (signal: NodeJS.Signals): void => {
      if (stopping) return;
      stopping = true;
      logger.info({ signal }, 'shutting down');
      const closed = sink.close().then(
        () => {
          logger.info({}, 'stopped');
          return 0;
        },
        (err: unknown) => {
          logger.error({ err }, 'shutdown failed');
          return 1;
        },
      );
      // Spans still buffered are flushed after the last request was answered.
      void closed.then(async (code) => {
        await stopTracing();
        resolve(code);
      });
    };
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
    process.on('SIGHUP', () => {
      try {
        sink.reloadTls();
      } catch (err) {
        logger.error({ err }, 'tls reload failed; the previous certificates stay in use');
      }
    });
  });
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`leasehold-sink: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
