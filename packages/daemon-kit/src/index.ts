// The public surface of @leasehold/daemon-kit: what the coordinator and the sink share. Named exports only.
export { installRouteAuth, routeTable } from './route-auth.js';
export type { CredentialCheck, Refusal, RouteAuthOptions, RouteEntry } from './route-auth.js';
export {
  LOG_LEVELS,
  bool,
  decimal,
  httpUrl,
  int,
  keyList,
  limit,
  logLevel,
  optionalText,
  required,
  secretKey,
} from './config-schemas.js';
export type { LogLevel } from './config-schemas.js';
export {
  logLevelOption,
  maxJsonDepthOption,
  removedCapabilityKeys,
  removedOption,
  serverOptions,
} from './daemon-options.js';
export type { ServerOptionsSpec } from './daemon-options.js';
export { ExitCode, packageVersion, runDaemon, runMain } from './bootstrap.js';
export type { DaemonDefinition, DaemonProcess, RunOptions, RunningDaemon } from './bootstrap.js';
export { readTlsFiles } from './tls-files.js';
export type { TlsFiles, TlsMaterial } from './tls-files.js';
export { writePortFile } from './port-file.js';
export { formatSseComment, formatSseEvent } from './sse-format.js';
export type { SseFrame } from './sse-format.js';
