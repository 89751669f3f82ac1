/**
 * Tracing (`@opentelemetry/api`; no-ops unless the process registered an SDK): each grant runs in a
 * `leasehold.task.handle` span, a child of the grant's `traceparent`. The handler and its writes run
 * in that span's context (the sink client's `leasehold.sink.write` is its child), and the attempt's
 * end (`task.complete`, `task.fail`, `lease.release`) carries it back to the coordinator.
 */
import type { Grant } from '@leasehold/protocol';
import { propagation, ROOT_CONTEXT, SpanStatusCode, trace, type Span } from '@opentelemetry/api';

const tracer = trace.getTracer('@leasehold/worker');

/** `leasehold.task.handle` for one grant, continuing the grant's trace context. */
export function startHandleSpan(grant: Grant, workerId: string): Span {
  const parent =
    grant.traceparent === undefined
      ? ROOT_CONTEXT
      : propagation.extract(ROOT_CONTEXT, { traceparent: grant.traceparent });
  return tracer.startSpan(
    'leasehold.task.handle',
    {
      attributes: {
        'leasehold.task_id': grant.taskId,
        'leasehold.resource': grant.resource,
        'leasehold.token': grant.token,
        'leasehold.attempt': grant.attempt,
        'leasehold.worker_id': workerId,
      },
    },
    parent,
  );
}

/** The span's `traceparent` for a frame (none when tracing is off). */
export function traceparentField(span: Span): { traceparent?: string } {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), carrier);
  return carrier.traceparent === undefined ? {} : { traceparent: carrier.traceparent };
}

export function markSpanFailed(span: Span, outcome: string, err: unknown): void {
  span.setAttribute('leasehold.outcome', outcome);
  span.recordException(err instanceof Error ? err : String(err));
  span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
}
