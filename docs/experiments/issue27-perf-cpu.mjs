// Issue 27, twentieth step (docs/benchmarks.md): read `perf script -F pid,tid,ip,sym,dso` output.
//
//   node docs/experiments/issue27-perf-cpu.mjs PERF.SCRIPT [PID]
//
// Prints, for each process with at least 1 % of the samples (or PID alone): its share of them,
// split by thread (main = the process's first thread, helpers = the others) and
// by kind of code at the sampled instruction (JIT code named through node's jitdump, V8 builtins,
// TurboFan, GC, other native code, the kernel); then, for PID, the first JS frame above the samples
// that sat in V8's slow property paths (megamorphic and missed inline caches, lookups, map
// transitions, object spreads) — the code whose objects have too many shapes. In the twentieth
// step that list began with protobufjs's `fromObject` of the coordinator's etcd requests.
//
// Name JIT code with `--perf-prof` and `perf inject --jit` (what issue27-perf-cpu.sh does), not
// with `--perf-basic-prof`: V8 reuses the addresses of code it moved or freed, and the basic map
// keeps the old names, so a long run's samples get impossible call chains.
import { readFileSync } from 'node:fs';

const [file, onlyPid] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: issue27-perf-cpu.mjs PERF.SCRIPT [PID]\n');
  process.exit(2);
}
const SLOW =
  /Megamorphic|PolymorphicName|LookupIterator|MigrateToMap|Transition|CopyDataProperties|CloneObject|MakePrototypesFast|LoadIC::|KeyedLoadIC|KeyedStoreIC|StoreIC/;

function kindOf(frame) {
  if (frame.includes('[kernel')) return 'kernel';
  if (/compiler::|Maglev|OptimizingCompile|CodeGenerator|Pipeline|Zone/.test(frame)) return 'turbofan';
  if (/Marking|MarkCompact|Sweep|Scaveng|Evacuat|RememberedSet|SlotSet|Heap|MinorMC|PointersUpdating/.test(frame))
    return 'gc';
  if (/ JS:|perf-\d+\.map|jitted-\d+-\d+\.so/.test(frame)) return 'jit';
  if (/Builtins_/.test(frame)) return 'builtins';
  return 'native';
}

const perPid = new Map(); // pid -> Map(thread:kind -> samples)
const slowCallers = new Map();
let total = 0;
let sample = undefined;

function flush() {
  if (sample === undefined || sample.frames.length === 0) return;
  total += 1;
  const { pid, tid, frames } = sample;
  const key = `${pid === tid ? 'main' : 'helpers'} ${kindOf(frames[0])}`;
  const kinds = perPid.get(pid) ?? new Map();
  kinds.set(key, (kinds.get(key) ?? 0) + 1);
  perPid.set(pid, kinds);
  if (pid === onlyPid && SLOW.test(frames[0])) {
    const js = frames.slice(1).find((f) => / JS:/.test(f));
    const name = js === undefined ? '(no JS frame)' : js.replace(/^\s*[0-9a-f]+\s+/, '').replace(/\s+\([^()]*\)$/, '');
    slowCallers.set(name, (slowCallers.get(name) ?? 0) + 1);
  }
}

for (const line of readFileSync(file, 'utf8').split('\n')) {
  const head = /^\s*(\d+)\/(\d+)\s*$/.exec(line);
  if (head !== null) {
    flush();
    sample = { pid: head[1], tid: head[2], frames: [] };
  } else if (line.trim() === '') {
    flush();
    sample = undefined;
  } else if (sample !== undefined) {
    sample.frames.push(line);
  }
}
flush();

const pct = (n, of) => `${((100 * n) / of).toFixed(1)} %`;
for (const [pid, kinds] of [...perPid].sort((a, b) => sum(b[1]) - sum(a[1]))) {
  const n = sum(kinds);
  if (onlyPid !== undefined ? pid !== onlyPid : n < total / 100) continue;
  console.log(`pid ${pid}: ${pct(n, total)} of the samples recorded`);
  for (const [kind, k] of [...kinds].sort((a, b) => b[1] - a[1])) console.log(`  ${kind.padEnd(18)} ${pct(k, n)}`);
}
if (onlyPid !== undefined) {
  const n = sum(perPid.get(onlyPid) ?? new Map());
  console.log(`\nslow property paths of pid ${onlyPid}, by the first JS frame above them (share of its samples):`);
  for (const [name, k] of [...slowCallers].sort((a, b) => b[1] - a[1]).slice(0, 20))
    console.log(`  ${pct(k, n).padStart(7)}  ${name}`);
}

function sum(m) {
  let s = 0;
  for (const v of m.values()) s += v;
  return s;
}
