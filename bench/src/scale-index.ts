/**
 * The coordinator's in-memory task index at scale: bytes of heap and RSS per pending task and per
 * held lease, the time to build the index from a snapshot's records, and one `select()` (the
 * acquire path) at N pending tasks. Targets (issue 23): ≤ 1 KiB RSS per pending task and ≤ 2 KiB
 * per held lease, at 1M pending tasks.
 *
 * Each measurement runs in a fresh `node --expose-gc` child (the built
 * `packages/coordinator/dist/measure/index-memory.js`), so one run's heap does not colour the next:
 *
 *   pnpm build && node bench/dist/scale-index.js                 # 100k, 300k and 1M tasks
 *   node bench/dist/scale-index.js --tasks 1000000 --leases 100000
 *
 * Import {@link measureIndex} to run one from another suite (the scale bench).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { REPO_ROOT } from './infra/stack.js';

const run = promisify(execFile);

export const INDEX_MEMORY_MAIN = join(REPO_ROOT, 'packages/coordinator/dist/measure/index-memory.js');

export interface IndexMeasurement {
  readonly tasks: number;
  readonly leases: number;
  readonly heapBytesPerTask: number;
  readonly rssBytesPerTask: number;
  readonly heapBytesPerLease: number;
  readonly rssBytesPerLease: number;
  readonly decodeMs: number;
  readonly buildMs: number;
  readonly selectMicros: number;
}

/** One measurement in a fresh process: `tasks` pending tasks, `leases` of them held. */
export async function measureIndex(options: {
  readonly tasks: number;
  readonly leases: number;
}): Promise<IndexMeasurement> {
  const heapMb = Math.max(512, Math.ceil((options.tasks * 3_000) / 1_048_576));
  const { stdout } = await run(
    process.execPath,
    [
      '--expose-gc',
      `--max-old-space-size=${heapMb}`,
      INDEX_MEMORY_MAIN,
      '--tasks',
      String(options.tasks),
      '--leases',
      String(options.leases),
    ],
    { maxBuffer: 1024 * 1024, timeout: 600_000 },
  );
  return JSON.parse(stdout.trim()) as IndexMeasurement;
}

function argInt(name: string): number | undefined {
  const at = process.argv.indexOf(`--${name}`);
  const text = at < 0 ? undefined : process.argv[at + 1];
  return text === undefined ? undefined : Number(text);
}

async function main(): Promise<void> {
  const tasks = argInt('tasks');
  const sizes = tasks === undefined ? [100_000, 300_000, 1_000_000] : [tasks];
  const rows: IndexMeasurement[] = [];
  for (const n of sizes) rows.push(await measureIndex({ tasks: n, leases: argInt('leases') ?? Math.floor(n / 10) }));
  const line = (cells: readonly (string | number)[]) => `| ${cells.join(' | ')} |`;
  console.log(
    line([
      'pending tasks',
      'held leases',
      'heap B/task',
      'RSS B/task',
      'heap B/lease',
      'RSS B/lease',
      'decode ms',
      'build ms',
      'select µs',
    ]),
  );
  console.log(line(Array(9).fill('---')));
  for (const r of rows) {
    console.log(
      line([
        r.tasks,
        r.leases,
        r.heapBytesPerTask,
        r.rssBytesPerTask,
        r.heapBytesPerLease,
        r.rssBytesPerLease,
        r.decodeMs,
        r.buildMs,
        r.selectMicros,
      ]),
    );
  }
  const at = rows.at(-1);
  if (at !== undefined) {
    console.log(
      `\ntargets at ${at.tasks} pending: RSS/task ${at.rssBytesPerTask} B (≤ 1024: ${at.rssBytesPerTask <= 1024 ? 'met' : 'NOT met'}), ` +
        `RSS/lease ${at.rssBytesPerLease} B (≤ 2048: ${at.rssBytesPerLease <= 2048 ? 'met' : 'NOT met'})`,
    );
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  });
}
