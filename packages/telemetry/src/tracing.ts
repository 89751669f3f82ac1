/**
 * Opt-in OpenTelemetry tracing for the daemons. `startTracing(config.tracing, service)` in a
 * daemon's main: with exporter `off` (the default) it loads nothing and the libraries'
 * `@opentelemetry/api` calls stay no-ops (no span objects, no `traceparent` on the wire); with
 * `otlp` or `file` it loads the SDK ({@link registerTracerProvider}) and registers it globally.
 * Call `shutdown()` before the process exits: it flushes spans still buffered.
 */
import type { TracingConfig } from '@leasehold/protocol';
import type { TracedService, Tracing } from './tracing-types.js';

const OFF: Tracing = Object.freeze({ enabled: false, shutdown: () => Promise.resolve() });

export async function startTracing(config: TracingConfig, service: TracedService): Promise<Tracing> {
  if (config.exporter === 'off') return OFF;
  const sdk = await import('./tracing-sdk.js');
  return sdk.registerTracerProvider(config, service);
}
