// Issue 27, eleventh step (docs/benchmarks.md): where a takeover's time goes, per stage.
//
// Apply issue27-takeover-stage-trace.patch (temporary instrumentation: it is not on main), build the
// coordinator, `touch /tmp/lh-trace.on`, run `node bench/run.mjs --only takeover`, then
// `node docs/experiments/issue27-takeover-stage-trace.mjs /tmp/lh-trace.jsonl`. The coordinator
// appends one JSON line per event to /tmp/lh-trace.jsonl: `timer` (the session deadline timer fired,
// `late` ms after the deadline it was set for), `due` and `ended` (an expired holder's session: its
// end txn landed, freeing resources `r`), `freed`, and for the takers' taskId acquires `select`,
// `grant-enq` (into the grant group commit), `granted-txn`, `advanced` (the sink's fence advance
// answered) and `deliver`. The suite's two phases (full cycle rate, then half) are split at the
// longest pause between expiries that comes later than 20 s into the trace.
import { readFileSync } from 'node:fs';

const events = readFileSync(process.argv[2] ?? '/tmp/lh-trace.jsonl', 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => JSON.parse(line));

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};

function stages(evs) {
  const due = new Map();
  const ended = new Map();
  const freed = new Map();
  const sessionOf = new Map();
  const at = new Map();
  for (const e of evs) {
    if (e.ev === 'due') due.set(e.s, e.t);
    else if (e.ev === 'ended') {
      ended.set(e.s, e.t);
      for (const r of e.r) sessionOf.set(r, e.s);
    } else if (e.ev === 'freed') freed.set(e.s, e.t);
    else if (e.r !== undefined) {
      const key = `${e.r}\n${e.ev}`;
      at.set(key, [...(at.get(key) ?? []), e.t]);
    }
  }
  const firstAfter = (r, ev, t) => {
    const xs = (at.get(`${r}\n${ev}`) ?? []).filter((x) => x >= t - 0.001);
    return xs.length === 0 ? undefined : Math.min(...xs);
  };
  const out = {
    'deadline timer late': evs.filter((e) => e.ev === 'timer').map((e) => e.late),
    'due → end txn landed': [],
    'end txn reply → taker selects': [],
    'grant txn (queued + run)': [],
    'fence advance': [],
    'due → grant delivered': [],
  };
  for (const [r, s] of sessionOf) {
    const f = freed.get(s);
    const d = due.get(s);
    if (f === undefined || d === undefined) continue;
    // From the deadline, not from `freed`: the watch's owner delete can free the resource in the
    // index before the end txn's own reply is handled.
    const sel = firstAfter(r, 'select', d);
    const enq = sel === undefined ? undefined : firstAfter(r, 'grant-enq', sel);
    const txn = enq === undefined ? undefined : firstAfter(r, 'granted-txn', enq);
    const adv = txn === undefined ? undefined : firstAfter(r, 'advanced', txn);
    const del = adv === undefined ? undefined : firstAfter(r, 'deliver', adv);
    if (del === undefined) continue;
    out['due → end txn landed'].push(ended.get(s) - d);
    out['end txn reply → taker selects'].push(sel - f);
    out['grant txn (queued + run)'].push(txn - enq);
    out['fence advance'].push(adv - txn);
    out['due → grant delivered'].push(del - d);
  }
  return out;
}

const dues = events.filter((e) => e.ev === 'due').map((e) => e.t);
dues.sort((a, b) => a - b);
let cut = Infinity;
let widest = 0;
for (let i = 0; i + 1 < dues.length; i += 1) {
  const gap = dues[i + 1] - dues[i];
  if (dues[i] > dues[0] + 20_000 && gap > widest) {
    widest = gap;
    cut = dues[i] + 1_000;
  }
}
for (const [phase, evs] of [
  ['full cycle rate', events.filter((e) => e.t < cut)],
  ['half the cycle rate', events.filter((e) => e.t >= cut)],
]) {
  const out = stages(evs);
  console.log(`${phase}: ${out['due → grant delivered'].length} takeovers traced end to end`);
  for (const [name, xs] of Object.entries(out)) {
    if (xs.length === 0) continue;
    console.log(
      `  ${name.padEnd(26)} p50 ${pct(xs, 0.5).toFixed(1)}  p90 ${pct(xs, 0.9).toFixed(1)}  p99 ${pct(xs, 0.99).toFixed(1)} ms`,
    );
  }
}
