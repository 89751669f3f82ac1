/**
 * One row per metric, one markdown table, one JSON file. A row's `ratio` is value / baseline for
 * rates ("higher is better"); `met` compares the ratio (or, for a latency/limit row without a
 * baseline ratio, the value) with the target.
 */
export interface BenchRow {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly baseline: number | null;
  /** What the baseline is, for the table. */
  readonly baselineName?: string;
  readonly ratio: number | null;
  /** Target: ratio >= target (`>=`), or value <= target (`<=`). */
  readonly target: number | null;
  readonly targetKind?: '>=' | '<=';
  readonly met: boolean | null;
  readonly note?: string;
}

export const round = (x: number, digits = 0): number => Number(x.toFixed(digits));

/** A figure compared with a baseline of the same unit, where higher is better. */
export function ratioRow(args: {
  name: string;
  value: number;
  unit: string;
  baseline: number;
  baselineName: string;
  target?: number;
  note?: string;
  digits?: number;
}): BenchRow {
  const ratio = args.baseline > 0 ? args.value / args.baseline : 0;
  const digits = args.digits ?? 0;
  return {
    name: args.name,
    value: round(args.value, digits),
    unit: args.unit,
    baseline: round(args.baseline, digits),
    baselineName: args.baselineName,
    // Two decimals, or three when two would round a miss up to its target (0.997 is not 1.00).
    ratio:
      args.target !== undefined && ratio < args.target && round(ratio, 2) >= args.target
        ? Math.floor(ratio * 1000) / 1000
        : round(ratio, 2),
    target: args.target ?? null,
    ...(args.target === undefined ? {} : { targetKind: '>=' as const }),
    met: args.target === undefined ? null : ratio >= args.target,
    ...(args.note === undefined ? {} : { note: args.note }),
  };
}

/** A figure with an upper bound (latency, failures), optionally next to a reference value. */
export function limitRow(args: {
  name: string;
  value: number;
  unit: string;
  limit?: number;
  baseline?: number;
  baselineName?: string;
  note?: string;
  digits?: number;
}): BenchRow {
  const digits = args.digits ?? 1;
  return {
    name: args.name,
    value: round(args.value, digits),
    unit: args.unit,
    baseline: args.baseline === undefined ? null : round(args.baseline, digits),
    ...(args.baselineName === undefined ? {} : { baselineName: args.baselineName }),
    ratio: args.baseline === undefined || args.baseline === 0 ? null : round(args.value / args.baseline, 2),
    target: args.limit ?? null,
    ...(args.limit === undefined ? {} : { targetKind: '<=' as const }),
    met: args.limit === undefined ? null : args.value <= args.limit,
    ...(args.note === undefined ? {} : { note: args.note }),
  };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)] ?? 0;
}

export function formatTable(rows: readonly BenchRow[]): string {
  const cell = (v: number | null | undefined) => (v === null || v === undefined ? '' : String(v));
  const target = (r: BenchRow) => (r.target === null ? '' : r.targetKind === '<=' ? `≤ ${r.target}` : `≥ ${r.target}×`);
  const met = (r: BenchRow) => (r.met === null ? '' : r.met ? 'yes' : '**MISSED**');
  const lines = [
    '| metric | value | unit | baseline | baseline is | ratio | target | met |',
    '| --- | ---: | --- | ---: | --- | ---: | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.value} | ${r.unit} | ${cell(r.baseline)} | ${r.baselineName ?? ''} | ${cell(r.ratio)} | ${target(r)} | ${met(r)} |`,
    ),
  ];
  return lines.join('\n');
}

/**
 * Measure a figure and its baselines in `rounds` interleaved rounds (A, B, C, A, B, C, ...), so a
 * load swing on a shared machine hits every side alike; returns each side's per-round results.
 * `between` runs after every side's round (not measured), e.g. to compact etcd.
 */
export async function interleave<K extends string, T>(
  rounds: number,
  sides: Readonly<Record<K, (round: number) => Promise<T>>>,
  log: (line: string) => void,
  between?: () => Promise<void>,
): Promise<Record<K, T[]>> {
  const keys = Object.keys(sides) as K[];
  const out = Object.fromEntries(keys.map((k) => [k, [] as T[]])) as Record<K, T[]>;
  for (let r = 1; r <= rounds; r += 1) {
    for (const k of keys) {
      const value = await sides[k](r);
      out[k].push(value);
      log(`round ${r}/${rounds} ${k}: ${JSON.stringify(value)}`);
      await between?.();
    }
  }
  return out;
}

export const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
export const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : sum(xs) / xs.length);
