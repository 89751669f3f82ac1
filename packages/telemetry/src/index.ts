// @leasehold/telemetry: what the daemons (coordinator, sink, worker) share for metrics and tracing.
// The tracing SDK modules are loaded by startTracing only when tracing is on: nothing here imports
// them statically.
export { collectProcessMetrics } from './process-metrics.js';
export { startTracing } from './tracing.js';
export type { TracedService, Tracing } from './tracing-types.js';
export type { SpanFileRecord } from './span-file-exporter.js';
