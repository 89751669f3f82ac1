/**
 * `pnpm bench` (scripts/bench.sh -> bench/run.mjs -> this file, after the build):
 *
 *   pnpm bench [--only sink,grants,cycle,takeover,renewal,pg] [--quick] [--rounds N] [--seconds N]
 *              [--out bench-results.json] [--docs]
 *
 * Runs every suite against its own fresh etcd (spawned on free loopback ports), prints one markdown table,
 * names the missed targets, writes bench-results.json at the repo root (one entry per metric) and,
 * with --docs, rewrites the results section of docs/benchmarks.md. Exit code 0 even when a target
 * is missed (the table says so); 1 when a suite fails.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCycleBench } from './cycle.js';
import { startEtcd, type Etcd } from './infra/etcd.js';
import { REPO_ROOT } from './infra/stack.js';
import { describeMachine, formatMachine } from './machine.js';
import { runGrantsBench } from './grants.js';
import { runRenewalBench } from './renewal.js';
import { formatTable, type BenchRow } from './report.js';
import { runPgSinkBench } from './pg-sink.js';
import { runSinkBench } from './sink.js';
import { runTakeoverBench } from './takeover.js';

const SUITES = ['sink', 'grants', 'cycle', 'takeover', 'renewal', 'pg'] as const;
type Suite = (typeof SUITES)[number];

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}
const has = (name: string) => process.argv.includes(name);

const quick = has('--quick');
const rounds = Number(flag('--rounds') ?? (quick ? 1 : 3));
/** Measured seconds per side per round. */
const seconds = Number(flag('--seconds') ?? (quick ? 2 : 5));
const only = (flag('--only') ?? SUITES.join(','))
  .split(',')
  .map((s) => s.trim())
  .filter((s): s is Suite => (SUITES as readonly string[]).includes(s));
const out = flag('--out') ?? join(REPO_ROOT, 'bench-results.json');
const log = (line: string) => process.stderr.write(`# ${line}\n`);

const machine = describeMachine();
log(formatMachine(machine));
const startedAt = new Date();
const t0 = performance.now();
const rows: BenchRow[] = [];
const failures: string[] = [];
for (const suite of only) {
  const s0 = performance.now();
  log(`suite ${suite} ...`);
  // A fresh etcd per suite: work left over from one suite (lease revokes, compaction of the
  // previous suite's keys, a grown database) must not be measured as the next suite's cost.
  let etcd: Etcd | undefined;
  try {
    if (suite === 'sink') {
      rows.push(...(await runSinkBench({ seconds: seconds * rounds, rounds, connections: 100, log })));
    } else if (suite === 'pg') {
      rows.push(...(await runPgSinkBench({ seconds, rounds, connections: 64, log })));
    } else {
      etcd = await startEtcd();
      const common = { etcd, rounds, seconds, log };
      switch (suite) {
        case 'grants':
          rows.push(...(await runGrantsBench(common)));
          break;
        case 'cycle':
          rows.push(...(await runCycleBench(common)));
          break;
        case 'takeover':
          rows.push(...(await runTakeoverBench({ ...common, takeovers: quick ? 32 : 128 })));
          break;
        case 'renewal':
          rows.push(...(await runRenewalBench({ ...common, sessions: 100, perSession: quick ? 20 : 100 })));
          break;
      }
    }
  } catch (err) {
    failures.push(suite);
    log(`suite ${suite} FAILED: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
  } finally {
    await etcd?.stop();
  }
  log(`suite ${suite} took ${Math.round((performance.now() - s0) / 1000)} s`);
}

const elapsedS = Math.round((performance.now() - t0) / 1000);
const table = formatTable(rows);
const missed = rows.filter((r) => r.met === false);
const summary =
  missed.length === 0
    ? `All ${rows.filter((r) => r.met !== null).length} targets met.`
    : `Missed targets (${missed.length}): ${missed.map((r) => `${r.name} vs ${r.baselineName ?? 'limit'}`).join('; ')}.`;
process.stdout.write(`${table}\n\n${summary}${failures.length > 0 ? ` Failed suites: ${failures.join(', ')}.` : ''}\n`);
process.stdout.write(`Took ${elapsedS} s on ${formatMachine(machine)}.\n`);

writeFileSync(
  out,
  `${JSON.stringify(
    {
      startedAt: startedAt.toISOString(),
      elapsedSeconds: elapsedS,
      machine,
      options: { rounds, seconds, quick, only },
      failedSuites: failures,
      metrics: rows.map((r) => ({
        name: r.name,
        value: r.value,
        unit: r.unit,
        baseline: r.baseline,
        baselineName: r.baselineName ?? null,
        ratio: r.ratio,
        target: r.target,
        targetKind: r.targetKind ?? null,
        met: r.met,
        note: r.note ?? null,
      })),
    },
    null,
    2,
  )}\n`,
);
log(`wrote ${out}`);

if (has('--docs')) {
  const docs = join(REPO_ROOT, 'docs', 'benchmarks.md');
  const begin = '<!-- bench:results:begin -->';
  const end = '<!-- bench:results:end -->';
  const text = readFileSync(docs, 'utf8');
  const a = text.indexOf(begin);
  const b = text.indexOf(end);
  if (a < 0 || b < a) {
    log(`${docs} has no ${begin} ... ${end} section; not updated`);
  } else {
    const notes = rows
      .filter((r) => r.note !== undefined)
      .map((r) => `- ${r.name}: ${r.note ?? ''}`)
      .join('\n');
    const section = [
      begin,
      '',
      `Run ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${elapsedS} s, \`${['pnpm bench', ...process.argv.slice(2).filter((x) => x !== '--docs')].join(' ')}\`, on ${formatMachine(machine)}.`,
      '',
      table,
      '',
      summary,
      '',
      notes,
      '',
      end,
    ].join('\n');
    writeFileSync(docs, text.slice(0, a) + section + text.slice(b + end.length));
    // Keep `pnpm format:check` green: the table is aligned the way prettier wants it.
    spawnSync(join(REPO_ROOT, 'node_modules', '.bin', 'prettier'), ['--write', docs], { stdio: 'ignore' });
    log(`updated ${docs}`);
  }
}
process.exitCode = failures.length > 0 ? 1 : 0;
