/**
 * `node bench/dist/analyze-profile.js FILE.cpuprofile [--top 25] [--skip 5] [--until 30] [--busy-seconds]`:
 * what a `node --cpu-prof`
 * profile (LEASEHOLD_BENCH_PROFILE=coordinator,sink,worker) spent its busy time on — self time by
 * area (GC, node internals, each npm package, each leasehold package, native code), the top
 * functions by self time with their heaviest call paths, and the leasehold functions by inclusive
 * time. Shares are of busy samples ((idle) left out); `--skip S` leaves out the first S seconds
 * (start-up: module loading, JIT), `--until U` everything after U seconds (both from the profile's
 * start), so one phase of a run can be read alone. `--busy-seconds` prints, instead, the busy share
 * of each second of the profile, to find a phase's window. Markdown on stdout.
 */
import { readFileSync } from 'node:fs';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
  readonly startTime: number;
  readonly endTime: number;
}

const file = process.argv[2];
if (file === undefined) {
  process.stderr.write('usage: analyze-profile FILE.cpuprofile [--top N] [--skip S] [--until U] [--busy-seconds]\n');
  process.exit(2);
}
const topAt = process.argv.indexOf('--top');
const TOP = topAt > 0 ? Number(process.argv[topAt + 1]) : 25;
const skipAt = process.argv.indexOf('--skip');
const SKIP_US = skipAt > 0 ? Number(process.argv[skipAt + 1]) * 1e6 : 0;
const untilAt = process.argv.indexOf('--until');
const UNTIL_US = untilAt > 0 ? Number(process.argv[untilAt + 1]) * 1e6 : Infinity;
const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;

const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

function area(f: CallFrame): string {
  const { functionName: name, url } = f;
  if (name.startsWith('(')) return name;
  if (url === '') return '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg !== undefined) return pkg;
  const own = /packages\/([^/]+)\//.exec(url)?.[1] ?? /bench\//.exec(url)?.[0];
  return own !== undefined ? `leasehold: ${own.replace(/\/$/, '')}` : url;
}

function label(f: CallFrame): string {
  const short = f.url.replace(/^.*node_modules\/(\.pnpm\/[^/]+\/node_modules\/)?/, '').replace(/^.*\/packages\//, '');
  return `${f.functionName === '' ? '(anonymous)' : f.functionName} ${short === '' ? '' : `${short}:${f.lineNumber + 1}`}`.trim();
}

const isIdle = (id: number) => byId.get(id)?.callFrame.functionName === '(idle)';

if (process.argv.includes('--busy-seconds')) {
  // The busy share of each whole second since the profile's start: where the phases of a run are.
  const busyPerSecond: number[] = [];
  let at = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    const second = Math.floor(at / 1e6);
    while (busyPerSecond.length <= second) busyPerSecond.push(0);
    if (!isIdle(id)) busyPerSecond[second] = (busyPerSecond[second] ?? 0) + delta;
  });
  process.stdout.write('| second | busy % of the main thread |\n| ---: | ---: |\n');
  busyPerSecond.forEach((us, second) => {
    process.stdout.write(`| ${second} | ${(us / 1e4).toFixed(0)} |\n`);
  });
  process.exit(0);
}

const selfUs = new Map<number, number>();
let elapsedUs = 0;
profile.samples.forEach((id, i) => {
  const delta = profile.timeDeltas[i] ?? 0;
  elapsedUs += delta;
  if (elapsedUs < SKIP_US || elapsedUs > UNTIL_US) return;
  selfUs.set(id, (selfUs.get(id) ?? 0) + delta);
});
let busy = 0;
for (const [id, us] of selfUs) if (!isIdle(id)) busy += us;
const pct = (us: number) => `${((100 * us) / busy).toFixed(1)}%`;

const areas = new Map<string, number>();
const fns = new Map<string, { us: number; paths: Map<string, number> }>();
const inclusiveOwn = new Map<string, number>();
for (const [id, us] of selfUs) {
  const node = byId.get(id);
  if (node === undefined || node.callFrame.functionName === '(idle)') continue;
  const a = area(node.callFrame);
  areas.set(a, (areas.get(a) ?? 0) + us);
  const key = label(node.callFrame);
  const entry = fns.get(key) ?? { us: 0, paths: new Map<string, number>() };
  entry.us += us;
  const stack: string[] = [];
  const seen = new Set<string>();
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const f = byId.get(at)?.callFrame;
    if (f === undefined || f.functionName === '(root)') break;
    const l = label(f);
    stack.push(l);
    if (area(f).startsWith('leasehold') && !seen.has(l)) {
      seen.add(l);
      inclusiveOwn.set(l, (inclusiveOwn.get(l) ?? 0) + us);
    }
  }
  const path = stack
    .slice(1, 7)
    .map((s) => s.split(' ')[0])
    .join(' ← ');
  entry.paths.set(path, (entry.paths.get(path) ?? 0) + us);
  fns.set(key, entry);
}

const seconds = (Math.min(profile.endTime - profile.startTime, UNTIL_US) - SKIP_US) / 1e6;
const out: string[] = [];
out.push(
  `Profile ${file}: ${seconds.toFixed(1)} s, busy ${(busy / 1e6).toFixed(1)} s (${((100 * busy) / 1e6 / seconds).toFixed(0)}% of one core)`,
);
out.push('', '| area (self time) | share |', '| --- | ---: |');
for (const [a, us] of [...areas].sort((x, y) => y[1] - x[1]).slice(0, 20)) out.push(`| ${a} | ${pct(us)} |`);
out.push(
  '',
  '| function (self time) | share | heaviest call paths (callers, innermost first) |',
  '| --- | ---: | --- |',
);
for (const [k, v] of [...fns].sort((x, y) => y[1].us - x[1].us).slice(0, TOP)) {
  const paths = [...v.paths]
    .sort((x, y) => y[1] - x[1])
    .slice(0, 2)
    .map(([p, us]) => `${p || '—'} (${pct(us)})`)
    .join('; ');
  out.push(`| ${k} | ${pct(v.us)} | ${paths} |`);
}
out.push('', '| leasehold function (inclusive) | share |', '| --- | ---: |');
for (const [k, us] of [...inclusiveOwn].sort((x, y) => y[1] - x[1]).slice(0, TOP)) out.push(`| ${k} | ${pct(us)} |`);
process.stdout.write(`${out.join('\n')}\n`);
