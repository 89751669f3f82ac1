import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { collectOptions, defineConfig } from './config-options.js';
import { TRACING, TRACING_OPTIONS, TRACING_RAW_SHAPE, tracingConfigOf, tracingProblems } from './tracing-options.js';

const PREFIX = 'LEASEHOLD_TEST_';
const Raw = z.object(TRACING_RAW_SHAPE);

function load(env: Record<string, string>) {
  const { raw, problems } = collectOptions(TRACING_OPTIONS, PREFIX, { env, argv: [] });
  problems.push(...tracingProblems(raw, PREFIX));
  const parsed = Raw.safeParse(raw);
  if (!parsed.success) problems.push(...parsed.error.issues.map((i) => `${String(i.path[0])}: ${i.message}`));
  return { problems, config: parsed.success ? tracingConfigOf(parsed.data) : undefined };
}

describe('tracing options', () => {
  it('are off by default, sampling every new trace', () => {
    expect(load({})).toEqual({ problems: [], config: { exporter: 'off', file: undefined, sampleRatio: 1 } });
  });

  it('file needs a path; otlp takes its endpoint from the OTEL_ variables', () => {
    expect(load({ LEASEHOLD_TEST_TRACING: 'file' }).problems).toEqual([
      'LEASEHOLD_TEST_TRACING_PATH: required with TRACING=file',
    ]);
    expect(load({ LEASEHOLD_TEST_TRACING: 'file', LEASEHOLD_TEST_TRACING_PATH: '/tmp/s.jsonl' }).config).toEqual({
      exporter: 'file',
      file: '/tmp/s.jsonl',
      sampleRatio: 1,
    });
    expect(load({ LEASEHOLD_TEST_TRACING: 'otlp', LEASEHOLD_TEST_TRACING_SAMPLE_RATIO: '0.25' }).config).toEqual({
      exporter: 'otlp',
      file: undefined,
      sampleRatio: 0.25,
    });
  });

  it('refuses an unknown exporter and a ratio outside 0..1', () => {
    expect(load({ LEASEHOLD_TEST_TRACING: 'jaeger' }).problems).toHaveLength(1);
    expect(load({ LEASEHOLD_TEST_TRACING_SAMPLE_RATIO: '1.5' }).problems).toHaveLength(1);
  });
});

describe('TRACING, declared once', () => {
  const tracing = defineConfig({ prefix: PREFIX, fields: { tracing: TRACING } });
  const loadDeclared = (env: Record<string, string>) => tracing.load({ env, argv: [] }).tracing;

  it('gives the same config and problems as the table form', () => {
    expect(loadDeclared({})).toEqual(load({}).config);
    const otlp = { LEASEHOLD_TEST_TRACING: 'otlp', LEASEHOLD_TEST_TRACING_SAMPLE_RATIO: '0.25' };
    expect(loadDeclared(otlp)).toEqual(load(otlp).config);
    expect(() => loadDeclared({ LEASEHOLD_TEST_TRACING: 'file' })).toThrow(
      'LEASEHOLD_TEST_TRACING_PATH: required with TRACING=file',
    );
    expect(Object.keys(tracing.options)).toEqual(Object.keys(TRACING_OPTIONS));
  });
});
