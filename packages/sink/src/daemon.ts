/**
 * The `leasehold-sink` process as a daemon-kit definition: how it loads and redacts its config,
 * logs, traces, opens its store and listens. main.ts runs `sinkDaemon(io)` with the production
 * collaborators. The second argument takes `createSink`'s dependency-injection seams that make
 * sense for a whole process (the rule writes are judged by), so another entry point can run this
 * same process with other collaborators. The definition reads no file itself: the HTTPS
 * certificate and key and the files the PostgreSQL URL names go through `io.readFile`.
 *
 * Start-up prints one JSON log line `{"msg":"listening","host":...,"port":N}` and, with
 * `--port-file PATH`, writes the bound port to PATH (atomically) so tests can use `--port 0`.
 */
import { packageVersion, readTlsFiles, writePortFile, type DaemonDefinition } from '@leasehold/daemon-kit';
import { HELP_TEXT, loadConfig, redactConfig, type SinkConfig } from './config.js';
import { SchemaVersionError } from './errors.js';
import { createSink, type SinkDeps } from './sink.js';
import { connectionTls } from './store/postgres-tls.js';

export interface SinkDaemonIo {
  /** Reads a certificate, key or CA file (main.ts: `readFileSync`). */
  readonly readFile: (path: string) => Buffer;
}

/** The seams of {@link createSink} a process entry point may set; default: none (production). */
export type SinkDaemonDeps = Pick<SinkDeps, 'rules'>;

export function sinkDaemon(io: SinkDaemonIo, deps: SinkDaemonDeps = {}): DaemonDefinition<SinkConfig> {
  const readText = (path: string): string => io.readFile(path).toString('utf8');
  return {
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
      const tls = config.tls;
      const readTls = () => (tls === undefined ? undefined : readTlsFiles(tls, io.readFile));
      const https = readTls();
      const database =
        config.store === 'postgres' && config.databaseUrl !== undefined
          ? connectionTls(config.databaseUrl, readText)
          : undefined;
      const started = await createSink(config, {
        ...deps,
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
}
