// The public surface of @leasehold/protocol. Named exports only.
export {
  INT64_MAX,
  TokenFormatError,
  TokenSchema,
  FenceSchema,
  parseToken,
  parseFence,
  TOKEN_PATTERN,
  FENCE_PATTERN,
  formatToken,
  compareTokens,
} from './token.js';
export type { FencingToken } from './token.js';
export { ErrorCode, ERROR_CODES, ERROR_CODE_INFO, isRetryableCode, httpStatusOf, isErrorCode } from './error-codes.js';
export { LeaseholdError, ConfigError, SchemaVersionError } from './errors.js';
export {
  ID_MAX_LENGTH,
  ID_PATTERN,
  ResourceIdSchema,
  TaskIdSchema,
  ResultIdSchema,
  WorkerIdSchema,
  RequestIdSchema,
  IncarnationSchema,
  isValidId,
  defaultResultId,
  QueueNameSchema,
  QUEUE_NAME_MAX_LENGTH,
  DEFAULT_QUEUE,
  MAX_SESSION_QUEUES,
} from './ids.js';
export type { ResourceId, TaskId, ResultId, WorkerId, QueueName } from './ids.js';
export { PROTOCOL_VERSION, MIN_PROTOCOL_VERSION, isCompatibleProtocolVersion } from './protocol-version.js';
export { canonicalJson, canonicalJsonOfParsed } from './canonical-json.js';
export type { JsonValue } from './canonical-json.js';
export { checkWithSchema, describeIssues, isStandardSchema } from './standard-schema.js';
export type { SchemaCheck, StandardIssue, StandardResult, StandardSchema } from './standard-schema.js';
export {
  CAPABILITY_VERSION,
  generateCapabilitySeed,
  parseCapabilityPublicKeys,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  publicKeysOf,
  signCapability,
  signVouch,
  verifyCapability,
  verifyVouch,
} from './capability.js';
export type { CapabilityClaims, CapabilityPublicKey, CapabilitySigningKey, VouchedGrant } from './capability.js';

export * from './messages/common.js';
export * from './messages/session.js';
export * from './messages/lease.js';
export * from './messages/worker-protocol.js';
export * from './messages/sink.js';
export * from './messages/admin.js';

export {
  BackoffSchema,
  RetryPolicySchema,
  RetryPolicyInputSchema,
  DEFAULT_RETRY_POLICY,
  MAX_ATTEMPTS_LIMIT,
  MAX_BACKOFF_MS,
  MAX_NON_RETRYABLE,
  resolveRetryPolicy,
  retryDelayMs,
} from './model/retry-policy.js';
export type { Backoff, RetryPolicy, RetryPolicyInput } from './model/retry-policy.js';
export { backoffCeilingMs, backoffDelayMs } from './backoff.js';
export type { BackoffOptions } from './backoff.js';
export { RepeatGate } from './repeat-gate.js';
export { TurnCork } from './turn-cork.js';
export type { Corkable } from './turn-cork.js';
export type { GateDecision } from './repeat-gate.js';
export type { Clock } from './model/clock.js';
export { decideAdvance, decideWrite } from './model/fence-rules.js';
export type { AdvanceDecision, FencedTransactionOutcome, WriteDecision } from './model/fence-rules.js';
export { FencedStore } from './model/fenced-store.js';
export type { FenceAdvancer, StoredEntry, FenceRules } from './model/fenced-store.js';
export { SequenceAllocator } from './model/token-allocator.js';
export type { TokenAllocator } from './model/token-allocator.js';
export { LeaseTable } from './model/lease-table.js';
export type {
  Owner,
  Lease,
  AcquireResult,
  RenewResult,
  ReleaseResult,
  ExpiredLease,
  LeaseTableOptions,
  AcquireRequest,
  HeldLeaseRef,
} from './model/lease-table.js';
export { JSON_SCHEMA_SOURCES, generateJsonSchemas } from './json-schemas.js';
export {
  check,
  collectOptions,
  defineConfig,
  derived,
  flagOf,
  option,
  formatOptionsHelp,
  formatHelp,
  wantsHelp,
  wantsVersion,
  wantsCheckConfig,
  deepFreeze,
  splitList,
  weakSecretProblem,
} from './config-options.js';
export type {
  OptionSpec,
  OptionTable,
  ConfigInput,
  CollectedOptions,
  OptionSource,
  AnyDeclaration,
  CheckDeclaration,
  ConfigDefinition,
  DeclarationContext,
  DerivationContext,
  Declarations,
  DefinedConfig,
  DerivedDeclaration,
  OptionDeclaration,
  OptionInit,
  ValueOf,
} from './config-options.js';
export { createKeyRing, parseBearer } from './bearer.js';
export { normalizePath, RouteCredential } from './http-path.js';
export { jsonLimitProblem, DEFAULT_JSON_LIMITS } from './json-limits.js';
export type { JsonLimits } from './json-limits.js';
export type { KeyRing } from './bearer.js';
export { fastCoordinatorMessage, fastWorkerMessage } from './messages/fast-decode.js';
export { compileValidator } from './validate.js';
export {
  TracingExporter,
  TRACING,
  TRACING_OPTIONS,
  TRACING_RAW_SHAPE,
  tracingProblems,
  tracingConfigOf,
} from './tracing-options.js';
export type { TracingConfig } from './tracing-options.js';
