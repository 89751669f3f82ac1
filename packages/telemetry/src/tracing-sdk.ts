/**
 * The OpenTelemetry SDK set-up of a daemon: a tracer provider with the service's resource, the
 * sampler (parent-based: a span with a remote parent follows the parent's decision, a new trace is
 * recorded with probability `sampleRatio`), the AsyncLocalStorage context manager and the W3C
 * trace-context propagator, registered globally so that the libraries' `@opentelemetry/api` calls
 * reach it. Imported only by {@link startTracing} when tracing is on: with tracing off not one
 * SDK module is loaded.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  ParentBasedSampler,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';
import type { TracingConfig } from '@leasehold/protocol';
import { SpanFileExporter } from './span-file-exporter.js';
import type { TracedService, Tracing } from './tracing-types.js';

function processorOf(config: TracingConfig, service: TracedService): SpanProcessor {
  if (config.exporter === 'file') {
    if (config.file === undefined) throw new Error('tracing: the file exporter needs a file');
    return new SimpleSpanProcessor({ exporter: new SpanFileExporter(config.file, service.name) });
  }
  // Endpoint, headers and timeout from the standard OTEL_EXPORTER_OTLP_* variables.
  return new BatchSpanProcessor({ exporter: new OTLPTraceExporter() });
}

export function registerTracerProvider(config: TracingConfig, service: TracedService): Tracing {
  const provider = new TracerProvider({
    resource: resourceFromAttributes({
      [ATTR_SERVICE_NAME]: service.name,
      [ATTR_SERVICE_VERSION]: service.version,
      ...(service.instanceId === undefined ? {} : { 'service.instance.id': service.instanceId }),
    }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) }),
    spanProcessors: [processorOf(config, service)],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    enabled: true,
    shutdown: async () => {
      await provider.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
    },
  };
}
