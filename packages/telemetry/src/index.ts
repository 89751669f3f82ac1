// @leasehold/telemetry: what the daemons (coordinator, sink, worker) share for metrics and tracing.
export { collectProcessMetrics } from './process-metrics.js';
