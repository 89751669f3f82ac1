// `@leasehold/sink/client`: the sink's HTTP client alone, without the server and its native
// SQLite module (coordinators and workers import this entry).
export { SinkClient } from './sink-client.js';
export type {
  SinkClientOptions,
  AdvanceResult,
  WriteResult,
  WriteArgs,
  ClientStoredResult,
  ClientResourceView,
  SinkHealth,
} from './sink-client.js';
