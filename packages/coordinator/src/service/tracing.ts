/**
 * The coordinator's spans, through `@opentelemetry/api` only: without a registered SDK (tracing
 * off, the default) every call here is a no-op and no `traceparent` is produced. The daemon's
 * main registers the SDK (`@leasehold/telemetry`) when `LEASEHOLD_COORDINATOR_TRACING` is on.
 *
 * Spans: `leasehold.task.submit` (its traceparent is stored in the task record) ->
 * `leasehold.lease.grant` (child of the stored submit, on whichever coordinator grants; its
 * traceparent goes out on `lease.granted`) -> the worker's `leasehold.task.handle` ->
 * `leasehold.task.complete` / `leasehold.task.fail` / `leasehold.lease.release` (children of the
 * traceparent the worker sends back).
 */
import { context, propagation, ROOT_CONTEXT, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import type { CoordinatorMessage } from '@leasehold/protocol';

export const tracer = trace.getTracer('@leasehold/coordinator');

/** Attribute names: OpenTelemetry's where one exists, `leasehold.*` otherwise. */
export const Attr = {
  TASK_ID: 'leasehold.task_id',
  RESOURCE: 'leasehold.resource',
  TOKEN: 'leasehold.token',
  ATTEMPT: 'leasehold.attempt',
  WORKER_ID: 'leasehold.worker_id',
  SESSION_ID: 'leasehold.session_id',
  REQUEST_ID: 'leasehold.request_id',
  OUTCOME: 'leasehold.outcome',
  FENCE: 'leasehold.fence',
  ERROR_TYPE: 'error.type',
} as const;

/** The context a `traceparent` (from a frame, a header or a task record) continues; `base` without one. */
export function contextOf(traceparent: string | undefined, base: Context = ROOT_CONTEXT): Context {
  return traceparent === undefined ? base : propagation.extract(base, { traceparent });
}

/**
 * The `traceparent` of `span`: undefined when tracing is off (no propagator registered). A span
 * sampled out still propagates (flags 00), so the next process follows the same decision.
 */
export function traceparentOf(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), carrier);
  return carrier.traceparent;
}

/** An error reply or refusal: status ERROR with the code as `error.type`. */
export function markRefused(span: Span, code: string, message: string): void {
  span.setAttribute(Attr.ERROR_TYPE, code);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** End `span` with what the worker is told: an `error` frame marks it ERROR. */
export function endWithReply(span: Span, reply: CoordinatorMessage): CoordinatorMessage {
  if (reply.type === 'error') markRefused(span, reply.code, reply.message);
  span.end();
  return reply;
}

/** A thrown failure: an exception event and status ERROR. */
export function markFailed(span: Span, err: unknown): void {
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}
