/**
 * The sink's spans (`@opentelemetry/api` only: no-ops unless main.ts registered the SDK): one
 * server span per fenced write (`leasehold.sink.decide`, one per item of a batch) and per fence advance
 * (`leasehold.sink.advance`), a child of the caller's W3C `traceparent` header. The decision is
 * the span's `leasehold.decision` (the `outcome` label of the writes / advances metrics); a
 * refusal sets status ERROR with the code as `error.type`.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import type { FastifyRequest } from 'fastify';

const tracer = trace.getTracer('@leasehold/sink');

/** Run `handle` in a server span continuing the request's `traceparent`; the span ends with it. */
export function traced<T>(request: FastifyRequest, name: string, handle: (span: Span) => Promise<T> | T): Promise<T> {
  const parent = propagation.extract(ROOT_CONTEXT, request.headers);
  return inSpan(parent, name, { 'http.request.method': request.method, 'url.path': request.url }, handle);
}

/**
 * Run `handle` in a server span continuing `traceparent` (one item of a batch request, which
 * carries its writer's span in the item, since one request cannot continue several traces).
 */
export function tracedItem<T>(
  traceparent: string | undefined,
  request: FastifyRequest,
  name: string,
  handle: (span: Span) => Promise<T> | T,
): Promise<T> {
  const parent = traceparent === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, { traceparent });
  return inSpan(parent, name, { 'http.request.method': request.method, 'url.path': request.url }, handle);
}

async function inSpan<T>(
  parent: Context,
  name: string,
  attributes: Attributes,
  handle: (span: Span) => Promise<T> | T,
): Promise<T> {
  const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => handle(span));
  } catch (err) {
    span.recordException(err instanceof Error ? err : String(err));
    span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    throw err;
  } finally {
    span.end();
  }
}

/** The decision: `written`, `replayed`, `advanced`, `unchanged`, or a refusal's code (then ERROR). */
export function markDecision(span: Span, decision: string, fence?: string): void {
  span.setAttribute('leasehold.decision', decision.toLowerCase());
  if (fence !== undefined) span.setAttribute('leasehold.fence', fence);
  if (/^[A-Z_]+$/.test(decision)) {
    span.setAttribute('error.type', decision);
    span.setStatus({ code: SpanStatusCode.ERROR, message: decision });
  }
}
