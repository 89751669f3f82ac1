/**
 * Reads the span files the daemons write when `LEASEHOLD_<SERVICE>_OTEL_SPAN_FILE` is set (one JSON
 * object per finished span, see packages/protocol/src/tracing/span-file.ts).
 */
import { readFileSync } from 'node:fs';

export interface SpanRecord {
  readonly service: string;
  readonly name: string;
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly kind: string;
  readonly status: string;
  readonly attributes: Readonly<Record<string, unknown>>;
}

export function readSpans(path: string): SpanRecord[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as SpanRecord);
}
