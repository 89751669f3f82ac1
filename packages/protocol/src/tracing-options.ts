/**
 * The tracing options every daemon shares (`<PREFIX>TRACING`, `<PREFIX>TRACING_PATH`,
 * `<PREFIX>TRACING_SAMPLE_RATIO`), declared once in {@link TRACING}: a daemon places it in its
 * config tree (`tracing: TRACING`, see `defineConfig`) and gets the options, their parsing and the
 * "file needs a path" rule. Pure; the SDK that acts on the result lives in `@leasehold/telemetry`
 * and is loaded only when tracing is on. (`TRACING_PATH`, not `_FILE`: a `<NAME>_FILE` variable
 * means "read <NAME> from this file" to `collectOptions`.)
 *
 * `TRACING_OPTIONS`, `TRACING_RAW_SHAPE`, `tracingProblems` and `tracingConfigOf` are the same
 * declaration in the older table + raw-schema form, for configs not yet declared with
 * `defineConfig` (the worker's).
 */
import { z } from 'zod';
import { defineConfig, derived, option, type OptionTable } from './config-options.js';

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

const exporter = option({
  env: 'TRACING',
  help: 'OpenTelemetry tracing: off | otlp (OTEL_EXPORTER_OTLP_ENDPOINT) | file (TRACING_PATH)',
  default: 'off',
  schema: z.enum(['off', 'otlp', 'file']),
});
const file = option({
  env: 'TRACING_PATH',
  help: 'with --tracing file: append finished spans here, one JSON per line',
  schema: z.string().min(1).optional(),
});
const sampleRatio = option({
  env: 'TRACING_SAMPLE_RATIO',
  help: 'share of new traces recorded, 0..1 (spans with a remote parent follow its decision)',
  default: '1',
  schema: z
    .string()
    .regex(/^[0-9]+(\.[0-9]+)?$/, 'must be a decimal number')
    .transform(Number)
    .pipe(z.number().min(0).max(1)),
});

function fileProblem(mode: string | undefined, path: string | undefined, prefix: string): string | undefined {
  return mode === 'file' && path === undefined ? `${prefix}TRACING_PATH: required with TRACING=file` : undefined;
}

/** The tracing config of a daemon: `tracing: TRACING` in its `defineConfig` fields. */
export const TRACING = derived({ exporter, file, sampleRatio }, (values, { prefix, report }): TracingConfig => {
  const problem = fileProblem(values.exporter, values.file, prefix);
  if (problem !== undefined) report(problem);
  return { exporter: values.exporter, file: values.file, sampleRatio: values.sampleRatio };
});

export const TRACING_OPTIONS: OptionTable = defineConfig({ prefix: '', fields: { tracing: TRACING } }).options;

export const TRACING_RAW_SHAPE = {
  TRACING: exporter.schema,
  TRACING_PATH: file.schema,
  TRACING_SAMPLE_RATIO: sampleRatio.schema,
};

/** Cross-field rules on the raw values. */
export function tracingProblems(raw: Readonly<Record<string, string>>, prefix: string): string[] {
  const problem = fileProblem(raw.TRACING, raw.TRACING_PATH, prefix);
  return problem === undefined ? [] : [problem];
}

export function tracingConfigOf(parsed: {
  readonly TRACING: TracingExporter;
  readonly TRACING_PATH?: string | undefined;
  readonly TRACING_SAMPLE_RATIO: number;
}): TracingConfig {
  return { exporter: parsed.TRACING, file: parsed.TRACING_PATH, sampleRatio: parsed.TRACING_SAMPLE_RATIO };
}
