// `@leasehold/sink-client`: the sink's HTTP(S) client alone, without the server and its native
// SQLite module (coordinators and workers depend on this package, not on @leasehold/sink).
export { SinkClient } from './sink-client.js';
export { sinkResourcePath, sinkResultPath } from './paths.js';
export type {
  SinkClientOptions,
  AdvanceArgs,
  AdvanceResult,
  WriteResult,
  WriteArgs,
  WriteBatchingOptions,
  ClientStoredResult,
  ClientResourceView,
  ClientResourcePage,
  ResourcePageOptions,
  SinkHealth,
} from './sink-client.js';
export {
  baseUrlProblem,
  DEFAULT_MAX_RESPONSE_BYTES,
  JsonHttp,
  parseBaseUrl,
  refuseUnusableBaseUrl,
  tlsConnectOptions,
} from './http-json.js';
export type { BaseUrl, JsonHttpOptions, JsonReply, JsonRequest, TlsClientOptions } from './http-json.js';
export { MicroBatcher } from './micro-batcher.js';
export type { BatcherOptions, Settled } from './micro-batcher.js';
