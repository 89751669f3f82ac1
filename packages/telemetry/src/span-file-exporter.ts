/**
 * A span exporter that appends each finished span to a file as one JSON object per line (the
 * `file` tracing exporter: tests read it to follow a task across processes; an operator can `jq`
 * it without a collector). Writes are synchronous appends, so a span is on disk once exported and
 * nothing is lost at `process.exit`. Not for production volumes: use `otlp`.
 */
import { appendFileSync } from 'node:fs';
import { SpanKind, SpanStatusCode, type HrTime } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';

/** One line of a span file. */
export interface SpanFileRecord {
  readonly service: string;
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  /** `internal`, `server`, `client`, `producer`, `consumer`. */
  readonly kind: string;
  /** `unset`, `ok`, `error`. */
  readonly status: string;
  readonly statusMessage?: string;
  readonly startTimeMs: number;
  readonly durationMs: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly events: readonly { readonly name: string; readonly timeMs: number; readonly attributes: object }[];
  readonly links: readonly { readonly traceId: string; readonly spanId: string }[];
}

const KIND: Readonly<Record<SpanKind, string>> = {
  [SpanKind.INTERNAL]: 'internal',
  [SpanKind.SERVER]: 'server',
  [SpanKind.CLIENT]: 'client',
  [SpanKind.PRODUCER]: 'producer',
  [SpanKind.CONSUMER]: 'consumer',
};

const STATUS: Readonly<Record<SpanStatusCode, string>> = {
  [SpanStatusCode.UNSET]: 'unset',
  [SpanStatusCode.OK]: 'ok',
  [SpanStatusCode.ERROR]: 'error',
};

function toMs(time: HrTime): number {
  return time[0] * 1_000 + time[1] / 1_000_000;
}

export function toSpanFileRecord(span: ReadableSpan, service: string): SpanFileRecord {
  const context = span.spanContext();
  const parentSpanId = span.parentSpanContext?.spanId;
  return {
    service,
    name: span.name,
    traceId: context.traceId,
    spanId: context.spanId,
    ...(parentSpanId === undefined ? {} : { parentSpanId }),
    kind: KIND[span.kind],
    status: STATUS[span.status.code],
    ...(span.status.message === undefined ? {} : { statusMessage: span.status.message }),
    startTimeMs: toMs(span.startTime),
    durationMs: toMs(span.duration),
    attributes: span.attributes,
    events: span.events.map((e) => ({ name: e.name, timeMs: toMs(e.time), attributes: e.attributes ?? {} })),
    links: span.links.map((l) => ({ traceId: l.context.traceId, spanId: l.context.spanId })),
  };
}

export class SpanFileExporter implements SpanExporter {
  readonly #path: string;
  readonly #service: string;

  constructor(path: string, service: string) {
    this.#path = path;
    this.#service = service;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    try {
      const text = spans.map((s) => `${JSON.stringify(toSpanFileRecord(s, this.#service))}\n`).join('');
      appendFileSync(this.#path, text);
      done({ code: ExportResultCode.SUCCESS });
    } catch (err) {
      done({ code: ExportResultCode.FAILED, error: err instanceof Error ? err : new Error(String(err)) });
    }
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
}
