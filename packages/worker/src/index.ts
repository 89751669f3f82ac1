// The public surface of @leasehold/worker. Named exports only.
export { startWorker } from './worker.js';
export type {
  Worker,
  WorkerOptions,
  WorkerEvent,
  Task,
  TaskContext,
  TaskHandler,
  WriteOptions,
  WriteOutcome,
  WriteHookInfo,
} from './worker.js';
export { LeaseLostError, WriteRefusedError, LeaseholdError, ConfigError } from './errors.js';
export { LocalDeadline, conservativeDeadlineMs, DEFAULT_DEADLINE_OPTIONS } from './core/deadline.js';
export type { DeadlineOptions } from './core/deadline.js';
export { backoffDelayMs } from './core/backoff.js';
export type { BackoffOptions } from './core/backoff.js';
