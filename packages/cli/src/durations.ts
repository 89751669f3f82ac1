/**
 * Durations on the command line: `500ms`, `30s`, `5m`, `2h`, `7d`, or a combination (`1h30m`);
 * a bare number is milliseconds. One parser for every flag (`--delay`, `--older-than`,
 * `--backoff-initial`, ...), and its inverse for output.
 */

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/y;

/** Milliseconds, or undefined when `text` is not a duration. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  if (t.length === 0) return undefined;
  let total = 0;
  let at = 0;
  let lastUnit = Infinity;
  while (at < t.length) {
    PART.lastIndex = at;
    const m = PART.exec(t);
    if (m === null) return undefined;
    const unit = UNIT_MS[m[2] ?? ''] ?? 0;
    if (unit >= lastUnit) return undefined; // units in decreasing order, each once: 1h30m, not 30m1h
    lastUnit = unit;
    total += Number(m[1]) * unit;
    at = PART.lastIndex;
  }
  const ms = Math.round(total);
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** A short human form: `850ms`, `12s`, `1.5s`, `4m`, `3h`, `7d` (largest unit, one decimal at most). */
export function formatDuration(ms: number): string {
  const abs = Math.abs(ms);
  const sign = ms < 0 ? '-' : '';
  if (abs < 1_000) return `${sign}${Math.round(abs)}ms`;
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1_000],
  ] as const) {
    if (abs >= size) {
      const value = Math.round((abs / size) * 10) / 10;
      return `${sign}${Number.isInteger(value) ? value.toFixed(0) : value.toFixed(1)}${unit}`;
    }
  }
  return `${sign}${abs}ms`;
}
