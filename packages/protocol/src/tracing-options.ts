/**
 * The tracing options every daemon shares (`<PREFIX>TRACING`, `<PREFIX>TRACING_PATH`,
 * `<PREFIX>TRACING_SAMPLE_RATIO`), declared once: each service spreads {@link TRACING_OPTIONS} into
 * its option table, {@link TRACING_RAW_SHAPE} into its raw zod schema, and adds
 * {@link tracingProblems} to its cross-field checks. Pure; the SDK that acts on the result lives in
 * `@leasehold/telemetry` and is loaded only when tracing is on. (`TRACING_PATH`, not `_FILE`: a
 * `<NAME>_FILE` variable means "read <NAME> from this file" to `collectOptions`.)
 */
import { z } from 'zod';
import type { OptionTable } from './config-options.js';

export const TracingExporter = {
  /** No SDK loaded; the libraries' `@opentelemetry/api` calls are no-ops. The default. */
  OFF: 'off',
  /** OTLP/HTTP (JSON) to `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`. */
  OTLP: 'otlp',
  /** One JSON object per finished span, appended to `TRACING_PATH` (tests, debugging). */
  FILE: 'file',
} as const;
export type TracingExporter = (typeof TracingExporter)[keyof typeof TracingExporter];

export interface TracingConfig {
  readonly exporter: TracingExporter;
  /** The span file (exporter `file`). */
  readonly file: string | undefined;
  /** Share of new traces recorded (0..1); a span with a remote parent follows the parent's decision. */
  readonly sampleRatio: number;
}

export const TRACING_OPTIONS: OptionTable = Object.freeze({
  tracing: {
    env: 'TRACING',
    help: 'OpenTelemetry tracing: off | otlp (OTEL_EXPORTER_OTLP_ENDPOINT) | file (TRACING_PATH)',
    default: 'off',
  },
  'tracing-path': { env: 'TRACING_PATH', help: 'with --tracing file: append finished spans here, one JSON per line' },
  'tracing-sample-ratio': {
    env: 'TRACING_SAMPLE_RATIO',
    help: 'share of new traces recorded, 0..1 (spans with a remote parent follow its decision)',
    default: '1',
  },
});

export const TRACING_RAW_SHAPE = {
  TRACING: z.enum(['off', 'otlp', 'file']),
  TRACING_PATH: z.string().min(1).optional(),
  TRACING_SAMPLE_RATIO: z
    .string()
    .regex(/^[0-9]+(\.[0-9]+)?$/, 'must be a decimal number')
    .transform(Number)
    .pipe(z.number().min(0).max(1)),
};

/** Cross-field rules on the raw values. */
export function tracingProblems(raw: Readonly<Record<string, string>>, prefix: string): string[] {
  if (raw.TRACING === 'file' && raw.TRACING_PATH === undefined) {
    return [`${prefix}TRACING_PATH: required with TRACING=file`];
  }
  return [];
}

export function tracingConfigOf(parsed: {
  readonly TRACING: TracingExporter;
  readonly TRACING_PATH?: string | undefined;
  readonly TRACING_SAMPLE_RATIO: number;
}): TracingConfig {
  return { exporter: parsed.TRACING, file: parsed.TRACING_PATH, sampleRatio: parsed.TRACING_SAMPLE_RATIO };
}
