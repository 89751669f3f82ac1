/**
 * Reads the span files the daemons write with `<PREFIX>TRACING=file` (one JSON object per finished
 * span: `SpanFileRecord` of @leasehold/telemetry). `startCluster({ tracing: true })` names them
 * `spans-<service>.jsonl` in the cluster's directory.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { SpanFileRecord } from '@leasehold/telemetry';

export type { SpanFileRecord } from '@leasehold/telemetry';

export function readSpans(path: string): SpanFileRecord[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as SpanFileRecord);
}

/** Every span of every `spans-*.jsonl` file in `dir`. */
export function readSpanFiles(dir: string): SpanFileRecord[] {
  return readdirSync(dir)
    .filter((f) => /^spans-.*\.jsonl$/.test(f))
    .flatMap((f) => readSpans(join(dir, f)));
}
