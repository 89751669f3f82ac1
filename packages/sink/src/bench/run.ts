/**
 * CLI of the sink benchmark (after `npx tsc -b`):
 *   node packages/sink/dist/bench/run.js [--seconds N] [--rounds N] [--connections N] [--out FILE.jsonl]
 * Prints a markdown table and appends one JSON line per row to --out (default: none).
 */
import { appendFileSync } from 'node:fs';
import { formatBenchTable, runSinkBench } from './sink-bench.js';

function flag(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : undefined;
}

const seconds = Number(flag('--seconds') ?? 12);
const rounds = Number(flag('--rounds') ?? 3);
const connections = Number(flag('--connections') ?? 100);
const out = flag('--out');

const rows = await runSinkBench({
  seconds,
  rounds,
  connections,
  log: (line) => process.stderr.write(`# ${line}\n`),
});
process.stdout.write(`${formatBenchTable(rows)}\n`);
if (out !== undefined) {
  const at = new Date().toISOString();
  appendFileSync(out, rows.map((r) => JSON.stringify({ suite: 'sink', at, ...r })).join('\n') + '\n');
}
