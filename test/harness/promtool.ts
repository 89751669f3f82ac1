/**
 * Prometheus's own linters, for the tests of /metrics outputs and of deploy/observability:
 * `promtool check metrics` (exposition format and naming conventions), `check rules` and
 * `test rules`. promtool comes with Debian's `prometheus` package (scripts/bootstrap.sh installs it
 * as root); without it these tests skip, saying so.
 */
import { spawnSync } from 'node:child_process';

function findPromtool(): string | undefined {
  const fromEnv = process.env.PROMTOOL;
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  const probe = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? 'promtool' : undefined;
}

/** The promtool command, or undefined (tests using it skip). */
export const PROMTOOL = findPromtool();

if (PROMTOOL === undefined) {
  process.stderr.write(
    'promtool not found: the promtool checks are skipped (install Debian package `prometheus`, as scripts/bootstrap.sh does, or set PROMTOOL)\n',
  );
}

export interface PromtoolRun {
  readonly status: number | null;
  readonly output: string;
}

export function runPromtool(args: readonly string[], input?: string): PromtoolRun {
  if (PROMTOOL === undefined) throw new Error('promtool not found');
  const run = spawnSync(PROMTOOL, args, { encoding: 'utf8', input, timeout: 60_000 });
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

/** Problems `promtool check metrics` finds in one exposition text (empty: it passes). */
export function promtoolCheckMetrics(text: string): string[] {
  const run = runPromtool(['check', 'metrics'], text);
  const problems = run.output.split('\n').filter((line) => line.trim() !== '');
  if (run.status !== 0 && problems.length === 0) problems.push(`promtool exited ${run.status}`);
  return problems;
}

/**
 * Metric family names declared (`# TYPE`) in an exposition text; with `samples`, the sample names
 * too (`_bucket`, `_sum`, `_count`, `_created`), which is what a PromQL expression names.
 */
export function metricNamesOf(text: string, options: { readonly samples?: boolean } = {}): string[] {
  const families = [...text.matchAll(/^# TYPE (\S+) \S+$/gm)].map((m) => m[1]!);
  if (options.samples !== true) return families;
  const samples = [...text.matchAll(/^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]/gm)].map((m) => m[1]!);
  return [...new Set([...families, ...samples])];
}
