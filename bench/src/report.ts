/**
 * One row per figure, one markdown table, one JSON file (bench-results.json).
 *
 * A row carries its value and its baseline measured in the same run, the ratio as the median of the
 * per-round ratios with their min–max, the CPU µs per operation of both sides (from /proc), a target
 * and whether it was met. Target kinds:
 *   - `ratio>=`: the median ratio must reach the target (e.g. tasks/s vs BullMQ ≥ 1.0×);
 *   - `ratio<=`: the median ratio must stay at or below it (e.g. sink CPU per write ≤ 2.5× hello's);
 *   - `value<=`: the value itself (a latency, a count of failures).
 * `met` is null when there is no target, and when the run was overloaded (see machine.ts): then
 * `clearsTarget` still says what the median did, and the table says the run does not count.
 */
import { pooled, ratios, spread, type RoundResult } from './measure.js';

export type TargetKind = 'ratio>=' | 'ratio<=' | 'value<=';

export interface BenchRow {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
  readonly baseline: number | null;
  /** What the baseline is, for the table. */
  readonly baselineName?: string;
  /** Median of the per-round ratios (value / baseline), or the single ratio where there are no rounds. */
  readonly ratio: number | null;
  readonly ratioMin: number | null;
  readonly ratioMax: number | null;
  /** CPU µs per operation of the figure's side and of the baseline's side (what each counts: the note). */
  readonly cpuPerOp: number | null;
  readonly baselineCpuPerOp: number | null;
  readonly target: number | null;
  readonly targetKind?: TargetKind;
  readonly clearsTarget: boolean | null;
  met: boolean | null;
  readonly rounds?: number;
  readonly note?: string;
}

export const round = (x: number, digits = 0): number => Number(x.toFixed(digits));

/** Ratio digits: two, or three when two would round a miss onto its target (0.997 is not 1.00). */
function showRatio(ratio: number, target: number | undefined, kind: TargetKind | undefined): number {
  const r2 = round(ratio, 2);
  if (target !== undefined && kind === 'ratio>=' && ratio < target && r2 >= target)
    return Math.floor(ratio * 1000) / 1000;
  if (target !== undefined && kind === 'ratio<=' && ratio > target && r2 <= target)
    return Math.ceil(ratio * 1000) / 1000;
  return r2;
}

function clears(
  kind: TargetKind | undefined,
  target: number | undefined,
  ratio: number | null,
  value: number,
): boolean | null {
  if (target === undefined || kind === undefined) return null;
  if (kind === 'value<=') return value <= target;
  if (ratio === null) return false;
  return kind === 'ratio>=' ? ratio >= target : ratio <= target;
}

function row(args: {
  name: string;
  value: number;
  unit: string;
  baseline: number | null;
  baselineName?: string | undefined;
  ratio: number | null;
  ratioMin?: number | null;
  ratioMax?: number | null;
  cpuPerOp?: number | null;
  baselineCpuPerOp?: number | null;
  target?: number | undefined;
  targetKind?: TargetKind | undefined;
  rounds?: number | undefined;
  note?: string | undefined;
  digits: number;
}): BenchRow {
  const c = clears(args.targetKind, args.target, args.ratio, args.value);
  const r = (x: number | null | undefined) =>
    x === null || x === undefined ? null : showRatio(x, args.target, args.targetKind);
  return {
    name: args.name,
    value: round(args.value, args.digits),
    unit: args.unit,
    baseline: args.baseline === null ? null : round(args.baseline, args.digits),
    ...(args.baselineName === undefined ? {} : { baselineName: args.baselineName }),
    ratio: r(args.ratio),
    ratioMin: args.ratioMin === null || args.ratioMin === undefined ? null : round(args.ratioMin, 2),
    ratioMax: args.ratioMax === null || args.ratioMax === undefined ? null : round(args.ratioMax, 2),
    cpuPerOp: args.cpuPerOp === null || args.cpuPerOp === undefined ? null : round(args.cpuPerOp),
    baselineCpuPerOp:
      args.baselineCpuPerOp === null || args.baselineCpuPerOp === undefined ? null : round(args.baselineCpuPerOp),
    target: args.target ?? null,
    ...(args.targetKind === undefined ? {} : { targetKind: args.targetKind }),
    clearsTarget: c,
    met: c,
    ...(args.rounds === undefined ? {} : { rounds: args.rounds }),
    ...(args.note === undefined ? {} : { note: args.note }),
  };
}

/** Which CPU a side is charged: its counted processes, or counted + clients (the whole system). */
export type CpuScope = 'counted' | 'total';
const cpuOf = (scope: CpuScope) => (r: RoundResult) => (scope === 'counted' ? r.countedUs : r.countedUs + r.clientUs);

/** Rate vs rate (higher is better), per-round ratios, CPU per op of both sides. */
export function throughputRow(args: {
  name: string;
  unit: string;
  figure: readonly RoundResult[];
  base: readonly RoundResult[];
  baselineName: string;
  cpu: CpuScope;
  /** Baseline rate divided by this (e.g. 3 raw txns per task cycle). */
  baseDivisor?: number;
  target?: number;
  note?: string;
}): BenchRow {
  const div = args.baseDivisor ?? 1;
  const fig = args.figure.map((r) => r.rate);
  const base = args.base.map((r) => r.rate / div);
  const rs = spread(ratios(fig, base));
  return row({
    name: args.name,
    value: spread(fig).median,
    unit: args.unit,
    baseline: spread(base).median,
    baselineName: args.baselineName,
    ratio: rs.median,
    ratioMin: rs.min,
    ratioMax: rs.max,
    cpuPerOp: pooled(args.figure, cpuOf(args.cpu)),
    baselineCpuPerOp: pooled(args.base, cpuOf(args.cpu)) * div,
    target: args.target,
    targetKind: args.target === undefined ? undefined : 'ratio>=',
    rounds: args.figure.length,
    note: args.note,
    digits: 0,
  });
}

/** CPU per operation vs CPU per operation (lower is better), per-round ratios. */
export function cpuRow(args: {
  name: string;
  figure: readonly RoundResult[];
  base: readonly RoundResult[];
  figureCpu: (r: RoundResult) => number;
  baseCpu: (r: RoundResult) => number;
  baselineName: string;
  target?: number;
  note?: string;
}): BenchRow {
  const fig = args.figure.map(args.figureCpu);
  const base = args.base.map(args.baseCpu);
  const rs = spread(ratios(fig, base));
  const f = pooled(args.figure, args.figureCpu);
  const b = pooled(args.base, args.baseCpu);
  return row({
    name: args.name,
    value: f,
    unit: 'µs CPU/op',
    baseline: b,
    baselineName: args.baselineName,
    ratio: rs.median,
    ratioMin: rs.min,
    ratioMax: rs.max,
    cpuPerOp: f,
    baselineCpuPerOp: b,
    target: args.target,
    targetKind: args.target === undefined ? undefined : 'ratio<=',
    rounds: args.figure.length,
    note: args.note,
    digits: 0,
  });
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
  return row({
    name: args.name,
    value: args.value,
    unit: args.unit,
    baseline: args.baseline ?? null,
    baselineName: args.baselineName,
    ratio: args.baseline === undefined || args.baseline === 0 ? null : args.value / args.baseline,
    target: args.limit,
    targetKind: args.limit === undefined ? undefined : 'value<=',
    note: args.note,
    digits: args.digits ?? 1,
  });
}

/** A single ratio measured without rounds (kept for the PostgreSQL suite). */
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
  return row({
    name: args.name,
    value: args.value,
    unit: args.unit,
    baseline: args.baseline,
    baselineName: args.baselineName,
    ratio: args.baseline > 0 ? args.value / args.baseline : 0,
    target: args.target,
    targetKind: args.target === undefined ? undefined : 'ratio>=',
    note: args.note,
    digits: args.digits ?? 0,
  });
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil((sorted.length * p) / 100) - 1)] ?? 0;
}

export function formatTable(rows: readonly BenchRow[], overloaded: boolean): string {
  const cell = (v: number | null | undefined) => (v === null || v === undefined ? '' : String(v));
  const target = (r: BenchRow) =>
    r.target === null
      ? ''
      : r.targetKind === 'value<='
        ? `≤ ${r.target}`
        : `${r.targetKind === 'ratio<=' ? '≤' : '≥'} ${r.target}×`;
  const met = (r: BenchRow) => {
    if (r.clearsTarget === null) return '';
    if (overloaded) return `n/a (overloaded; ${r.clearsTarget ? 'clears' : 'misses'})`;
    return r.met === true ? 'yes' : '**MISSED**';
  };
  const ratio = (r: BenchRow) =>
    r.ratio === null ? '' : r.ratioMin === null ? String(r.ratio) : `${r.ratio} (${r.ratioMin}–${r.ratioMax})`;
  const cpu = (r: BenchRow) =>
    r.cpuPerOp === null
      ? ''
      : r.baselineCpuPerOp === null
        ? String(r.cpuPerOp)
        : `${r.cpuPerOp} / ${cell(r.baselineCpuPerOp)}`;
  const lines = [
    '| metric | value | unit | baseline | baseline is | ratio (min–max) | CPU µs/op (figure / baseline) | target | met |',
    '| --- | ---: | --- | ---: | --- | ---: | ---: | --- | --- |',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${Number.isFinite(r.value) ? r.value : '—'} | ${r.unit} | ${cell(r.baseline)} | ${r.baselineName ?? ''} | ${ratio(r)} | ${cpu(r)} | ${target(r)} | ${met(r)} |`,
    ),
  ];
  return lines.join('\n');
}

export const sum = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0);
export const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : sum(xs) / xs.length);
