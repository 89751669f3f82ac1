/**
 * The process around a daemon, written once for the coordinator and the sink: each `main.ts`
 * passes its definition and `process` to {@link runMain}.
 *
 * | argv / event           | what happens                                                                 | exit |
 * | ---------------------- | ---------------------------------------------------------------------------- | ---- |
 * | `--help`, `-h`         | the help text on stdout                                                      | 0    |
 * | `--version`, `-v`      | `<name> <version>` on stdout                                                 | 0    |
 * | bad configuration      | every problem (one ConfigError) on stderr                                    | 2    |
 * | `--check-config`       | the resolved config, secrets redacted, then `configuration OK`               | 0    |
 * | start-up fails         | a fatal log line and one stderr line (`<name>: <what> (<code>): <message>`)  | 1    |
 * | SIGTERM / SIGINT       | graceful `close()`; a forced exit after `forceExitAfterMs`                    | 0 (1 if close failed or was too slow) |
 * | SIGHUP                 | `reloadTls()` (the previous certificates stay when it throws)                | —    |
 *
 * The root logger is made here, once (pino: `service`, `pid`, the daemon's redaction), and logs the
 * resolved config (redacted) once; tracing starts before the daemon (its spans need the SDK) and
 * is flushed after it closed.
 */
import { createRequire } from 'node:module';
import {
  ConfigError,
  LeaseholdError,
  wantsCheckConfig,
  wantsHelp,
  wantsVersion,
  type TracingConfig,
} from '@leasehold/protocol';
import { startTracing } from '@leasehold/telemetry';
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import type { LogLevel } from './config-schemas.js';

/** A started daemon, as the bootstrap drives it. */
export interface RunningDaemon {
  /** SIGHUP: read the TLS certificate and key again; throws to keep the previous ones. */
  reloadTls?(): void;
  /** Graceful stop. */
  close(): Promise<void>;
}

export interface DaemonDefinition<C> {
  /** The binary's name: `leasehold-sink`. */
  readonly name: string;
  readonly version: string;
  readonly help: string;
  /** Pure: throws a ConfigError listing every problem. `readFile` reads `--config` and `_FILE` files. */
  loadConfig(
    env: Readonly<Record<string, string | undefined>>,
    argv: readonly string[],
    readFile: (path: string) => string,
  ): C;
  redactConfig(config: C): Record<string, unknown>;
  logLevel(config: C): LogLevel;
  /** pino's redaction for this daemon's log lines (auth headers, capabilities, payloads). */
  readonly logRedact: NonNullable<LoggerOptions['redact']>;
  tracing(config: C): { readonly config: TracingConfig; readonly instanceId?: string | undefined };
  /** Builds and starts the daemon; rejects on a start-up failure. */
  start(config: C, context: { readonly logger: Logger }): Promise<RunningDaemon>;
  /** A close that takes longer than this exits the process with 1. */
  forceExitAfterMs(config: C): number;
  /** What the stderr line calls a start-up failure (default `start-up failed`). */
  describeStartFailure?(err: unknown): string;
}

/** The part of `process` the bootstrap uses (a test passes a fake). */
export interface DaemonProcess {
  readonly argv: readonly string[];
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly pid: number;
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  once(signal: 'SIGTERM' | 'SIGINT', listener: () => void): unknown;
  on(signal: 'SIGHUP', listener: () => void): unknown;
  exit(code: number): void;
}

export interface RunOptions {
  /** Reads `--config` and `_FILE` files (main.ts passes `fs.readFileSync`). */
  readonly readFile: (path: string) => string;
  /** The root logger's destination (default stdout). */
  readonly logDestination?: DestinationStream;
}

export const ExitCode = {
  OK: 0,
  /** Start-up failed, shutdown failed or took too long. */
  FAILED: 1,
  /** The configuration is invalid. */
  BAD_CONFIG: 2,
} as const;

/** The version in the package.json next to the built module at `moduleUrl` (`import.meta.url` of dist/main.js). */
export function packageVersion(moduleUrl: string): string {
  return (createRequire(moduleUrl)('../package.json') as { version: string }).version;
}

const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Runs the daemon until a stop signal; resolves with the exit code. */
export async function runDaemon<C>(
  definition: DaemonDefinition<C>,
  proc: DaemonProcess,
  options: RunOptions,
): Promise<number> {
  const { name } = definition;
  const argv = proc.argv.slice(2);
  if (wantsHelp(argv)) {
    proc.stdout.write(`${definition.help.trimEnd()}\n`);
    return ExitCode.OK;
  }
  if (wantsVersion(argv)) {
    proc.stdout.write(`${name} ${definition.version}\n`);
    return ExitCode.OK;
  }
  let config: C;
  try {
    config = definition.loadConfig(proc.env, argv, options.readFile);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    proc.stderr.write(`${name}: ${err.message}\n\nRun with --help for the options.\n`);
    return ExitCode.BAD_CONFIG;
  }
  if (wantsCheckConfig(argv)) {
    proc.stdout.write(`${JSON.stringify(definition.redactConfig(config), null, 2)}\nconfiguration OK\n`);
    return ExitCode.OK;
  }
  const loggerOptions: LoggerOptions = {
    level: definition.logLevel(config),
    base: { service: name, pid: proc.pid },
    redact: definition.logRedact,
  };
  const logger =
    options.logDestination === undefined ? pino(loggerOptions) : pino(loggerOptions, options.logDestination);
  logger.info({ config: definition.redactConfig(config) }, 'configuration resolved');
  const traced = definition.tracing(config);
  const tracing = await startTracing(traced.config, {
    name,
    version: definition.version,
    ...(traced.instanceId === undefined ? {} : { instanceId: traced.instanceId }),
  });
  if (tracing.enabled) logger.info({ tracing: traced.config }, 'tracing on');
  // Spans still buffered are flushed after the last request was answered.
  const stopTracing = () =>
    tracing.shutdown().catch((err: unknown) => {
      logger.warn({ err }, 'tracing shutdown failed; spans may be lost');
    });

  let daemon: RunningDaemon;
  try {
    daemon = await definition.start(config, { logger });
  } catch (err) {
    const what = definition.describeStartFailure?.(err) ?? 'start-up failed';
    const code = err instanceof LeaseholdError ? err.code : 'INTERNAL';
    logger.fatal({ err }, what);
    proc.stderr.write(`${name}: ${what} (${code}): ${message(err)}\n`);
    await stopTracing();
    return ExitCode.FAILED;
  }

  const signal = await new Promise<string>((resolve) => {
    proc.once('SIGTERM', () => {
      resolve('SIGTERM');
    });
    proc.once('SIGINT', () => {
      resolve('SIGINT');
    });
    proc.on('SIGHUP', () => {
      try {
        daemon.reloadTls?.();
      } catch (err) {
        logger.error({ err }, 'tls reload failed; the previous certificates stay in use');
      }
    });
  });
  logger.info({ signal }, 'signal received');
  const force = setTimeout(() => {
    logger.fatal({ timeoutMs: definition.forceExitAfterMs(config) }, 'shutdown took too long, exiting');
    proc.exit(ExitCode.FAILED);
  }, definition.forceExitAfterMs(config));
  force.unref();
  let code: number = ExitCode.OK;
  try {
    await daemon.close();
    logger.info({}, 'stopped');
  } catch (err) {
    logger.error({ err }, 'shutdown failed');
    code = ExitCode.FAILED;
  } finally {
    clearTimeout(force);
  }
  await stopTracing();
  return code;
}

/** `main.ts`'s whole body: run the daemon, exit with its code (1 and the stack on an unexpected error). */
export function runMain<C>(definition: DaemonDefinition<C>, proc: DaemonProcess, options: RunOptions): void {
  runDaemon(definition, proc, options).then(
    (code) => {
      proc.exit(code);
    },
    (err: unknown) => {
      proc.stderr.write(
        `${definition.name}: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
      );
      proc.exit(ExitCode.FAILED);
    },
  );
}
