// The public surface of @leasehold/worker. Named exports only.
export { Worker, startWorker } from './worker.js';
export { WorkerState } from './events.js';
export type { WorkerEvent, WorkerEventType, WorkerEventOf, WorkerStatus } from './events.js';
export { WORKER_DEFAULTS, MAX_CONCURRENCY } from './options.js';
export type { WorkerOptions, ShutdownOptions } from './options.js';
export { defineHandler } from './types.js';
export type {
  Task,
  TaskContext,
  TaskHandler,
  GrantProof,
  WriteOptions,
  WriteOutcome,
  WriteHookInfo,
  SinkWriter,
  WorkerCredentials,
  WorkerStats,
  FencePool,
  FenceClientOf,
  FencedTransactionOptions,
  FencedTransactionOutcome,
} from './types.js';
export type { PayloadSchema, StandardIssue, StandardResult } from './core/payload-schema.js';
export { closedReplies, handled, webSocketTransport } from './connection.js';
export { PendingReplies } from './pending-replies.js';
export type {
  CarryingReplies,
  CompleteRequest,
  CoordinatorTransport,
  TransportConnection,
  ConnectionOptions,
  NextAcquire,
  WorkerRequest,
} from './connection.js';
export {
  LeaseLostError,
  WriteRefusedError,
  NonRetryableError,
  InvalidPayloadError,
  FatalWorkerError,
  LeaseholdError,
  ConfigError,
} from './errors.js';
