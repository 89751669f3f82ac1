// @leasehold/devkit: helpers for leasehold's own tests and benchmarks. Not published.
export { rawHttp, rawJson } from './raw-http.js';
export type { RawHttpAnswer, RawHttpRequest } from './raw-http.js';
