// Issue 27, twenty-second step (docs/benchmarks.md): the sink's SQLite store alone, the CPU per
// fenced write that its thread spends under the lone-write side.
//
//   node docs/experiments/issue27-sqlite-write-cpu.mjs [FULL|NORMAL]        (built workspace)
//
// Opens a fresh SqliteFenceStore in a temporary directory (WAL, synchronous FULL by default,
// decision retention 100,000), advances 200,000 resources (batches of 1,000), then writes one 200 B
// result to each in batches of 300 (the group commit's mean batch in the sink bench), and prints
// this process's CPU per write (process.cpuUsage: user and system). No worker thread and no
// structured clone: what the store's statements and commits cost, nothing else.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const { SqliteFenceStore } = await import(new URL('../../packages/sink/dist/store/sqlite-store.js', import.meta.url));

const synchronous = process.argv[2] === 'NORMAL' ? 'NORMAL' : 'FULL';
const dir = mkdtempSync(join(tmpdir(), 'sqlite-write-cpu-'));
const store = new SqliteFenceStore({ path: join(dir, 'sink.db'), synchronous, decisionRetention: 100_000 });
const RESOURCES = 200_000;
const BATCH = 300;
const filler = 'x'.repeat(160);
try {
  for (let i = 0; i < RESOURCES; i += 1000) {
    const ops = [];
    for (let j = i; j < i + 1000; j++) ops.push({ kind: 'advance', resource: `write-200/1/${j}`, token: 1001n });
    await store.applyBatch(ops);
  }
  const start = process.cpuUsage();
  let written = 0;
  for (let i = 0; i < RESOURCES; i += BATCH) {
    const ops = [];
    for (let j = i; j < Math.min(RESOURCES, i + BATCH); j++) {
      const payload = JSON.stringify({ n: j, output: filler, status: 'done' });
      ops.push({
        kind: 'write',
        resource: `write-200/1/${j}`,
        token: 1001n,
        resultId: `res-${j}-@`,
        workerId: `lg-${j}`,
        payload,
      });
    }
    const decisions = await store.applyBatch(ops);
    written += decisions.filter((d) => d.ok && d.outcome === 'written').length;
  }
  const cpu = process.cpuUsage(start);
  if (written !== RESOURCES) throw new Error(`only ${written} of ${RESOURCES} writes were written`);
  const per = (us) => (us / written).toFixed(1);
  console.log(
    `synchronous=${synchronous}: ${written} writes, ${per(cpu.user + cpu.system)} µs CPU each (user ${per(cpu.user)}, system ${per(cpu.system)})`,
  );
} finally {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
}
