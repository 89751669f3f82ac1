// Sink benchmark runner: `npx tsc -b && node bench/sink-bench.mjs [--seconds 12] [--rounds 3] [--out results.jsonl]`.
// The benchmark itself is TypeScript in packages/sink/src/bench/ (compiled to dist/bench/); this file only
// runs it, prints the markdown table and appends JSON lines for aggregation.
// An aggregator can `import { runSinkBench } from '../packages/sink/dist/bench/sink-bench.js'` instead.
import { appendFileSync } from 'node:fs';
import { formatBenchTable, runSinkBench } from '../packages/sink/dist/bench/sink-bench.js';

const arg = (name, fallback) => {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
};

const rows = await runSinkBench({
  seconds: Number(arg('--seconds', '12')),
  rounds: Number(arg('--rounds', '3')),
  connections: Number(arg('--connections', '100')),
  log: (line) => process.stderr.write(`# ${line}\n`),
});
process.stdout.write(`${formatBenchTable(rows)}\n`);
const out = arg('--out');
if (out !== undefined) {
  const at = new Date().toISOString();
  appendFileSync(out, rows.map((r) => JSON.stringify({ suite: 'sink', at, ...r })).join('\n') + '\n');
}
