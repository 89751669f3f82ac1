// @leasehold/devkit: helpers for leasehold's own tests and benchmarks. Not published.
export { rawHttp, rawJson } from './raw-http.js';
export type { RawHttpAnswer, RawHttpRequest } from './raw-http.js';
export { findPostgresBinDir, startLocalPostgres } from './postgres-cluster.js';
export type { LocalPostgres, LocalPostgresOptions } from './postgres-cluster.js';
