// The public surface of @leasehold/sink. Named exports only.
export { createSink } from './sink.js';
export type { Sink, SinkDeps, SinkOptions, SinkAddress } from './sink.js';
export {
  loadConfig,
  redactConfig,
  redactDatabaseUrl,
  wantsHelp,
  HELP_TEXT,
  ENV_PREFIX,
  OPTIONS,
  LOG_LEVELS,
} from './config.js';
export type { SinkConfig, LogLevel, ConfigDeps } from './config.js';
export { SchemaVersionError, ShuttingDownError, isRetryable, LeaseholdError, ConfigError } from './errors.js';

export { decideBatch, FENCED } from './core/batch.js';
export { pageLength, resultJsonBytes } from './core/page.js';
export type { BatchReader, BatchRules } from './core/batch.js';
export type {
  AdvanceOp,
  WriteOp,
  FenceOp,
  OpDecision,
  DecisionOutcome,
  DecisionRecord,
  NewResult,
  BatchEffects,
  BatchPlan,
} from './core/ops.js';

export type {
  FenceStore,
  StoredResultRow,
  DecisionRow,
  DecisionPageRows,
  ResourcePageRows,
  ResultPageQuery,
} from './store/port.js';
export { SqliteFenceStore } from './store/sqlite-store.js';
export { ThreadedSqliteStore } from './store/threaded-sqlite-store.js';
export type { SqliteStoreOptions } from './store/sqlite-store.js';
export { PostgresFenceStore } from './store/postgres-store.js';
export type { PostgresStoreOptions } from './store/postgres-store.js';
export { connectionTls } from './store/postgres-tls.js';
export type { PostgresConnection } from './store/postgres-tls.js';
export { SCHEMA_VERSION, APPLICATION_ID } from './store/migrations.js';

export { FencedService, DEFAULT_READ_PAGE_MAX_BYTES } from './service/fenced-service.js';
export type { AdvanceInput, WriteInput, FencedServiceOptions, ResourcePageInput } from './service/fenced-service.js';
export { createMetrics } from './metrics.js';
export type { SinkMetrics, MetricsOptions } from './metrics.js';
export { buildHttpApp } from './http/app.js';
export type { HttpAppOptions } from './http/app.js';
