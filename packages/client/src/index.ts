// The public surface of @leasehold/client. Named exports only.
export { LeaseholdClient, sinkEvents } from './client.js';
export { resourceOwnerPath, taskPath, taskRetryPath } from './paths.js';
export type {
  LeaseholdClientOptions,
  SubmitOutcome,
  SubmitOptions,
  SubmitManyOptions,
  ListOptions,
  PurgeAllOptions,
  TaskEventsOptions,
  SinkEventsOptions,
  SinkReadOptions,
  StandaloneSinkEventsOptions,
  EventStreamSettings,
} from './client.js';
export type { ResultSource, StoredResultOf, TaskResult, WaitOptions } from './wait-for-result.js';
export { InvalidResultError, SseEventTooLargeError, WaitTimeoutError } from './errors.js';
export { DEFAULT_MAX_SSE_EVENT_BYTES, SseParser } from './sse-parser.js';
export type { SseEvent, SseParserOptions } from './sse-parser.js';
export { streamEvents, reconnectDelayMs } from './event-stream.js';
export type { EventStreamOptions, ReconnectOptions, Decoded } from './event-stream.js';
export type {
  TaskView,
  TaskPage,
  ResourceOwnerView,
  SubmitTaskRequest,
  TaskStateName,
  TaskEvent,
  StreamResetEvent,
  CoordinatorEvent,
  SinkEvent,
  SinkDecisionEvent,
  SinkRefusalEvent,
  SinkStreamResetEvent,
  StoredResult,
  PurgeTasksRequest,
  PurgeTasksResponse,
  AttemptView,
  TaskError,
  JsonValue,
  StandardSchema,
  StandardIssue,
} from '@leasehold/protocol';
