/**
 * `pnpm bench` (scripts/bench.sh -> bench/run.mjs -> this file, after the build):
 *
 *   pnpm bench [--only sink,grants,cycle,takeover,renewal,consensus,pg,scale] [--quick] [--rounds N]
 *              [--seconds N] [--pin] [--out bench-results.json] [--docs] [--scale-tasks N] ...
 *
 * Runs every suite (pg and scale only when named) against its own fresh etcd, prints one markdown table,
 * names the missed targets, writes bench-results.json at the repo root (one row per figure plus the
 * machine and load record) and, with --docs, rewrites the results section of docs/benchmarks.md.
 * A run on an overloaded machine (machine.ts) is marked: no target counts as met, and --docs
 * refuses to publish it unless --docs-anyway is given. Exit code 0 even when a target is missed;
 * 1 when a suite fails.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runConsensusBench } from './consensus.js';
import { runCycleBench } from './cycle.js';
import { runGrantsBench } from './grants.js';
import { startEtcd, type Etcd } from './infra/etcd.js';
import { REPO_ROOT } from './infra/stack.js';
import { describeMachine, formatMachine, LoadRecorder } from './machine.js';
import { runPgSinkBench } from './pg-sink.js';
import { runRenewalBench } from './renewal.js';
import { formatTable, type BenchRow } from './report.js';
import { runScaleBench } from './scale.js';
import { runSinkBench } from './sink.js';
import { runTakeoverBench } from './takeover.js';

const SUITES = ['sink', 'grants', 'cycle', 'takeover', 'renewal', 'consensus', 'pg', 'scale'] as const;
/** pg needs PostgreSQL; scale takes long (1M tasks): both only when named. */
const DEFAULT_SUITES = SUITES.filter((s) => s !== 'pg' && s !== 'scale');
type Suite = (typeof SUITES)[number];

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}
/** Every value of a flag that may be repeated. */
function flags(name: string): string[] {
  return process.argv.flatMap((a, i) =>
    a === name && process.argv[i + 1] !== undefined ? [process.argv[i + 1] ?? ''] : [],
  );
}
const has = (name: string) => process.argv.includes(name);

const USAGE = `usage: pnpm bench [--only ${SUITES.join(',')}] [--quick] [--rounds N] [--seconds N] [--pin]
                  [--out bench-results.json] [--docs [--docs-anyway]]
                  [--scale-tasks N] [--scale-large N] [--scale-large-bytes B] [--scale-ended N]
                  [--scale-restart-timeout S] [--scale-retention-timeout S] [--scale-coordinator-env NAME=VALUE]...

  (default: every suite but pg and scale; full run ~15 min on 2 cores, --quick ≤ 2 min)
  --only LIST     comma-separated suites to run (pg and scale only when named)
  --quick         smoke run: 1 round × 1 s per side, 64 takeovers, renewal 0 → 2k → 0 with 1 s windows
  --rounds N      interleaved rounds per figure and baseline (default 5)
  --seconds N     measured seconds per side per round (default 4)
  --pin           sink suite: servers on CPU 0, load generators on CPU 1 (taskset)
  --out FILE      where to write the JSON results (default bench-results.json at the repo root)
  --docs          rewrite the results section of docs/benchmarks.md (refused when overloaded
                  unless --docs-anyway)
scale (pnpm bench --only scale: 1M small + 10k × 64 KiB pending tasks, ~20-30 min on 2 cores):
  --scale-tasks N             small pending tasks (default 1000000; 10000 with --quick)
  --scale-large N             large pending tasks (default 10000; 1000 with --quick; 0 = none)
  --scale-large-bytes B       payload of a large task (default 65536)
  --scale-ended N             tasks completed for the purge and retention figures (default 10000, ≤ tasks / 10)
  --scale-restart-timeout S   how long a restarted coordinator may take to be ready (default 600)
  --scale-retention-timeout S how long to wait for retention to remove completed tasks (default 120)
  --scale-coordinator-env N=V extra coordinator environment, repeatable (e.g. a short retention age)
env: LEASEHOLD_BENCH_PROFILE=coordinator,sink,worker (node --cpu-prof; then analyze-profile), LEASEHOLD_BENCH_VERBOSE=1,
     LEASEHOLD_BENCH_NODE_ARGS_COORDINATOR|_SINK|_WORKER='node options' ({name} = the process's name),
     LEASEHOLD_BENCH_COORDINATOR_ENV='NAME=VALUE …' (every coordinator of the run, e.g. an A-B of a setting)
`;
const SCALE_NUMBERS = [
  '--scale-tasks',
  '--scale-large',
  '--scale-large-bytes',
  '--scale-ended',
  '--scale-restart-timeout',
  '--scale-retention-timeout',
];
const VALUE_FLAGS = new Set(['--only', '--rounds', '--seconds', '--out', ...SCALE_NUMBERS, '--scale-coordinator-env']);
const SWITCHES = new Set(['--quick', '--pin', '--docs', '--docs-anyway', '--help', '-h']);
const argProblems: string[] = [];
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i] ?? '';
  if (VALUE_FLAGS.has(a)) {
    if (process.argv[i + 1] === undefined || process.argv[i + 1]?.startsWith('--') === true)
      argProblems.push(`${a} needs a value`);
    i++;
  } else if (!SWITCHES.has(a)) argProblems.push(`unknown argument ${a}`);
}
for (const name of (flag('--only') ?? '').split(',').filter((x) => x.trim() !== ''))
  if (!(SUITES as readonly string[]).includes(name.trim())) argProblems.push(`unknown suite ${name.trim()}`);
for (const f of ['--rounds', '--seconds'])
  if (flag(f) !== undefined && !(Number(flag(f)) > 0)) argProblems.push(`${f} must be a positive number`);
for (const f of SCALE_NUMBERS)
  if (flag(f) !== undefined && !/^\d+$/.test(flag(f) ?? '')) argProblems.push(`${f} must be a whole number`);
for (const e of flags('--scale-coordinator-env'))
  if (!/^[A-Z][A-Z0-9_]*=/.test(e)) argProblems.push(`--scale-coordinator-env wants NAME=VALUE, got ${e}`);
if (has('--help') || has('-h')) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (argProblems.length > 0) {
  process.stderr.write(`${argProblems.join('\n')}\n\n${USAGE}`);
  process.exit(2);
}

const quick = has('--quick');
const rounds = Number(flag('--rounds') ?? (quick ? 1 : 5));
/** Measured seconds per side per round. */
const seconds = Number(flag('--seconds') ?? (quick ? 1 : 4));
const maxWarmupSlices = quick ? 2 : 8;
const only = (flag('--only') ?? DEFAULT_SUITES.join(','))
  .split(',')
  .map((s) => s.trim())
  .filter((s): s is Suite => (SUITES as readonly string[]).includes(s));
const out = flag('--out') ?? join(REPO_ROOT, 'bench-results.json');
const log = (line: string) => process.stderr.write(`# ${line}\n`);

const machine = describeMachine();
const recorder = new LoadRecorder();
log(`${formatMachine(machine)}, load average at start ${machine.loadAverage}`);
const startedAt = new Date();
const t0 = performance.now();
const rows: BenchRow[] = [];
const failures: string[] = [];
const common = { rounds, seconds, maxWarmupSlices, log };
for (const suite of only) {
  const s0 = performance.now();
  log(`suite ${suite} ...`);
  // A fresh etcd per suite: work left over from one suite (lease revokes, compaction of the
  // previous suite's keys, a grown database) must not be measured as the next suite's cost.
  let etcd: Etcd | undefined;
  try {
    switch (suite) {
      case 'sink':
        rows.push(...(await runSinkBench({ ...common, connections: 100, pin: has('--pin') })));
        break;
      case 'pg':
        rows.push(...(await runPgSinkBench({ seconds, rounds, connections: 64, log })));
        break;
      case 'consensus':
        if (quick) log('consensus: skipped in --quick (etcdctl check perf runs 60 s)');
        else rows.push(...(await runConsensusBench({ log })));
        break;
      case 'grants':
        etcd = await startEtcd();
        rows.push(...(await runGrantsBench({ ...common, etcd })));
        break;
      case 'cycle':
        etcd = await startEtcd();
        rows.push(...(await runCycleBench({ ...common, etcd })));
        break;
      case 'takeover':
        etcd = await startEtcd();
        rows.push(
          ...(await runTakeoverBench({
            etcd,
            log,
            takeovers: quick ? 64 : 1024,
            settleMs: quick ? 500 : 2_000,
            rateWindowMs: quick ? 1_000 : 3_000,
          })),
        );
        break;
      case 'scale': {
        const tasks = Number(flag('--scale-tasks') ?? (quick ? 10_000 : 1_000_000));
        rows.push(
          ...(await runScaleBench({
            ...common,
            tasks,
            largeTasks: Number(flag('--scale-large') ?? (quick ? 1_000 : 10_000)),
            largeBytes: Number(flag('--scale-large-bytes') ?? 65_536),
            ended: Math.min(Number(flag('--scale-ended') ?? 10_000), Math.floor(tasks / 10)),
            lowLevel: 1_000,
            restartTimeoutMs: Number(flag('--scale-restart-timeout') ?? 600) * 1000,
            retentionTimeoutMs: Number(flag('--scale-retention-timeout') ?? 120) * 1000,
            coordinatorEnv: Object.fromEntries(
              flags('--scale-coordinator-env').map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]),
            ),
          })),
        );
        break;
      }
      case 'renewal':
        etcd = await startEtcd();
        rows.push(
          ...(await runRenewalBench({
            etcd,
            log,
            levels: quick ? [0, 2_000] : [0, 1_000, 10_000, 50_000],
            windowSeconds: quick ? 1 : 5,
          })),
        );
        break;
    }
  } catch (err) {
    failures.push(suite);
    log(`suite ${suite} FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    await etcd?.stop();
  }
  log(`suite ${suite} took ${Math.round((performance.now() - s0) / 1000)} s`);
}

const load = recorder.finish(machine.nproc);
if (load.overloaded) for (const r of rows) r.met = null;
const elapsedS = Math.round((performance.now() - t0) / 1000);
const table = formatTable(rows, load.overloaded);
const missed = rows.filter((r) => r.met === false);
const loadLine =
  `load average at start ${load.loadAtStart.join(' ')}, max during the run ${load.loadMax}; ` +
  `CPU used by other processes ${load.foreignCoresMean} cores on average (max ${load.foreignCoresMax} in a 5 s sample)` +
  (load.overloaded ? ` — **OVERLOADED** (${load.overloadedBecause ?? ''}): no target counts as met` : '');
const summary = load.overloaded
  ? `Overloaded run: targets not judged (${rows.filter((r) => r.clearsTarget === false).length} of ${rows.filter((r) => r.clearsTarget !== null).length} medians miss).`
  : missed.length === 0
    ? `All ${rows.filter((r) => r.met !== null).length} targets met.`
    : `Missed targets (${missed.length}): ${missed.map((r) => r.name).join('; ')}.`;
process.stdout.write(`${table}\n\n${summary}${failures.length > 0 ? ` Failed suites: ${failures.join(', ')}.` : ''}\n`);
// The notes say how each figure was made and why a step failed (the JSON has them too).
const noteLines = rows.filter((r) => r.note !== undefined).map((r) => `- ${r.name}: ${r.note ?? ''}`);
if (noteLines.length > 0) process.stdout.write(`\n${noteLines.join('\n')}\n\n`);
process.stdout.write(`Took ${elapsedS} s on ${formatMachine(machine)}; ${loadLine}.\n`);

const resultsJson = `${JSON.stringify(
  {
    startedAt: startedAt.toISOString(),
    elapsedSeconds: elapsedS,
    machine,
    load,
    options: { rounds, seconds, quick, only, maxWarmupSlices, args: process.argv.slice(2) },
    failedSuites: failures,
    metrics: rows.map((r) => ({
      name: r.name,
      value: r.value,
      unit: r.unit,
      baseline: r.baseline,
      baselineName: r.baselineName ?? null,
      ratio: r.ratio,
      ratioMin: r.ratioMin,
      ratioMax: r.ratioMax,
      cpuPerOp: r.cpuPerOp,
      baselineCpuPerOp: r.baselineCpuPerOp,
      target: r.target,
      targetKind: r.targetKind ?? null,
      clearsTarget: r.clearsTarget,
      met: r.met,
      rounds: r.rounds ?? null,
      note: r.note ?? null,
    })),
  },
  null,
  2,
)}\n`;
writeFileSync(out, resultsJson);
log(`wrote ${out}`);

if (has('--docs') && load.overloaded && !has('--docs-anyway')) {
  log('docs/benchmarks.md NOT updated: the run was overloaded (rerun on a quiet machine, or pass --docs-anyway)');
} else if (has('--docs')) {
  // The scale suite has a section of its own: `--only scale --docs` must not replace the table of
  // the default run (and a default run leaves the scale figures alone).
  const docs = join(REPO_ROOT, 'docs', 'benchmarks.md');
  const isScale = (r: BenchRow) => r.name.startsWith('scale:');
  let text = readFileSync(docs, 'utf8');
  const args = process.argv.slice(2).filter((x) => x !== '--docs' && x !== '--docs-anyway');
  for (const [marker, part] of [
    ['bench', rows.filter((r) => !isScale(r))],
    ['scale', rows.filter(isScale)],
  ] as const) {
    if (part.length === 0) continue;
    const begin = `<!-- ${marker}:results:begin -->`;
    const end = `<!-- ${marker}:results:end -->`;
    const a = text.indexOf(begin);
    const b = text.indexOf(end);
    if (a < 0 || b < a) {
      log(`${docs} has no ${begin} ... ${end} section; not updated`);
      continue;
    }
    const notes = part
      .filter((r) => r.note !== undefined)
      .map((r) => `- ${r.name}: ${r.note ?? ''}`)
      .join('\n');
    const section = [
      begin,
      '',
      `Run ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${elapsedS} s, \`${['pnpm bench', ...args].join(' ')}\`, ` +
        `on ${formatMachine(machine)}; ${loadLine}.`,
      '',
      formatTable(part, load.overloaded),
      '',
      summary,
      '',
      notes,
      '',
      end,
    ].join('\n');
    text = text.slice(0, a) + section + text.slice(b + end.length);
    log(`updated the ${marker} results of ${docs}`);
  }
  writeFileSync(docs, text);
  const formatted = [docs];
  if (flag('--only') === undefined && !quick) {
    // A full run's JSON is kept next to the docs (bench-results.json is overwritten by every run
    // and is not in git): docs/bench-results-<date>-<HHMM>.json (UTC start).
    const stamp = startedAt.toISOString().slice(0, 16).replace('T', '-').replace(':', '');
    const kept = join(REPO_ROOT, 'docs', `bench-results-${stamp}.json`);
    writeFileSync(kept, resultsJson);
    formatted.push(kept);
    log(`wrote ${kept}`);
  }
  // Keep `pnpm format:check` green: the table is aligned the way prettier wants it.
  spawnSync(join(REPO_ROOT, 'node_modules', '.bin', 'prettier'), ['--write', ...formatted], { stdio: 'ignore' });
}
process.exitCode = failures.length > 0 ? 1 : 0;
