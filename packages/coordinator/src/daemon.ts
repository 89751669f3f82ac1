/**
 * The `leasehold-coordinator` process as a daemon-kit definition: how it loads and redacts its
 * config, logs, traces and starts. main.ts runs `coordinatorDaemon(io)` with the production
 * collaborators. The second argument takes `createCoordinator`'s dependency-injection seams that
 * make sense for a whole process (the fence target's wrapper, the stored retry policy), so another
 * entry point can run this same process with other collaborators. The definition reads no file
 * itself: certificate files go through `io.readFile`, at start and again on SIGHUP.
 */
import { packageVersion, type DaemonDefinition } from '@leasehold/daemon-kit';
import { HELP_TEXT, loadConfig, redactConfig, type CoordinatorConfig } from './config.js';
import { createCoordinator, type CoordinatorDeps } from './index.js';

export interface CoordinatorDaemonIo {
  /** Reads a certificate or key file (main.ts: `readFileSync`). */
  readonly readFile: (path: string) => Buffer;
}

/** The seams of {@link createCoordinator} a process entry point may set; default: none (production). */
export type CoordinatorDaemonDeps = Pick<CoordinatorDeps, 'wrapFenceTarget' | 'retryPolicyOf'>;

export function coordinatorDaemon(
  io: CoordinatorDaemonIo,
  deps: CoordinatorDaemonDeps = {},
): DaemonDefinition<CoordinatorConfig> {
  return {
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
      const started = await createCoordinator(config, {
        ...deps,
        logger,
        defaultMetrics: true,
        readFile: io.readFile,
      });
      return {
        reloadTls: () => {
          started.reloadTls();
        },
        close: () => started.close(),
      };
    },
  };
}
