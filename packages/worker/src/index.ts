// The public surface of @leasehold/worker. Named exports only.
export { Worker, WorkerState, startWorker } from './worker.js';
export type {
  WorkerOptions,
  WorkerEvent,
  WorkerEventType,
  WorkerEventOf,
  WorkerStats,
  StateEvent,
  Task,
  TaskContext,
  TaskHandler,
  WriteOptions,
  WriteOutcome,
  WriteHookInfo,
  SinkWriter,
  WorkerCredentials,
} from './worker.js';
export { webSocketTransport } from './connection.js';
export type { CoordinatorTransport, TransportConnection, ConnectionOptions, WorkerRequest } from './connection.js';
export { LeaseLostError, WriteRefusedError, NonRetryableError, LeaseholdError, ConfigError } from './errors.js';
export { LocalDeadline, conservativeDeadlineMs, DEFAULT_DEADLINE_OPTIONS } from './core/deadline.js';
export type { DeadlineOptions } from './core/deadline.js';
export { backoffDelayMs } from './core/backoff.js';
export type { BackoffOptions } from './core/backoff.js';
