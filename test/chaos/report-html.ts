/**
 * The HTML timeline of a chaos run: one self-contained file (inline SVG and CSS, no scripts or
 * external assets). One lane per process; fault windows shaded on the lanes they touch (a link
 * fault on both ends); grants and writes marked by outcome; the sink's refusals; process exits;
 * violations as red lines across every lane and in a table. Hover for details (SVG <title>).
 */
import type { Violation } from './checker.js';
import type { LeaseBoundStats } from './checker-leases.js';
import type { RegisterStats } from './checker-register.js';
import type { ResourceSeriesStats } from './checker-resources.js';
import { renderResources } from './report-resources.js';
import type { FaultKind, History, WorkerEvent } from './history.js';

interface SummaryLike {
  readonly ok: boolean;
  readonly scenario: string;
  readonly seed: number;
  readonly sabotage: string | null;
  readonly violationCounts: Record<string, number>;
  readonly tasks: { readonly submitted: number; readonly completed: number };
  readonly durationsMs: Record<string, number>;
  readonly environment?: {
    readonly network: string;
    readonly sinkStore: string;
    readonly sinks: number;
    readonly clock: boolean;
    readonly notes: readonly string[];
  };
  readonly faults?: Record<string, number>;
  readonly staleWritesRefused?: number;
  readonly leaseBounds?: LeaseBoundStats | null;
  readonly register?: RegisterStats | null;
  readonly resources?: readonly ResourceSeriesStats[];
}

const FAULT_COLOURS: Record<FaultKind, string> = {
  pause: '#f0a030',
  kill: '#d03030',
  blackhole: '#555555',
  'one-way': '#8050c0',
  reset: '#e060a0',
  latency: '#d8c020',
  'partition-etcd-member': '#3070b0',
  'nft-drop': '#303030',
  'nft-one-way': '#6030a0',
  'nft-reject': '#c02080',
  'nft-loss': '#a08000',
  'netem-delay': '#b0a000',
  partition: '#1050a0',
  'clock-jump': '#00a0a0',
  'disk-full': '#804000',
  'self-pause': '#ffb000',
};

const WRITE_COLOURS: Record<string, string> = {
  written: '#20a040',
  replayed: '#20a0a0',
  STALE_TOKEN: '#e07000',
  FENCE_CONFLICT: '#a00000',
  RESULT_CONFLICT: '#8040c0',
  unknown: '#999999',
};

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function laneOrder(name: string): number {
  if (name.startsWith('etcd')) return 0;
  if (name === 'sink') return 1;
  if (name.startsWith('coordinator')) return 2;
  return 3;
}

/** Process names a fault target touches: `a->b` touches a and b; `etcd-peer->m` touches m. */
function lanesOf(target: string): string[] {
  const parts = target.split('->');
  return parts.filter((p) => p !== 'etcd-peer');
}

export function renderTimeline(history: History, violations: readonly Violation[], summary: SummaryLike): string {
  const names = new Set<string>(['sink']);
  for (const l of history.logs) names.add(l.process);
  for (const f of history.faults) for (const t of f.targets) for (const n of lanesOf(t)) names.add(n);
  for (const e of history.events) names.add(e.process);
  const lanes = [...names].sort((a, b) => laneOrder(a) - laneOrder(b) || a.localeCompare(b, 'en', { numeric: true }));
  const t0 = history.startedAtMs;
  const span = Math.max(1_000, history.endedAtMs - t0);
  const width = Math.max(1_200, Math.round((span / 1000) * 14));
  const left = 130;
  const laneH = 34;
  const top = 24;
  const height = top + lanes.length * laneH + 20;
  const x = (ms: number): number => left + ((ms - t0) / span) * width;
  const y = (lane: string): number => top + lanes.indexOf(lane) * laneH;
  const svg: string[] = [];

  // Grid: a tick every 5 s (every 30 s on long runs).
  const step = span > 240_000 ? 30_000 : 5_000;
  for (let t = 0; t <= span; t += step) {
    svg.push(
      `<line x1="${x(t0 + t)}" y1="${top - 6}" x2="${x(t0 + t)}" y2="${height - 18}" class="grid"/>` +
        `<text x="${x(t0 + t) + 2}" y="${top - 10}" class="tick">${t / 1000}s</text>`,
    );
  }
  lanes.forEach((lane, i) => {
    const ly = y(lane);
    svg.push(
      `<rect x="0" y="${ly}" width="${left + width + 20}" height="${laneH}" class="${i % 2 === 0 ? 'lane0' : 'lane1'}"/>` +
        `<text x="6" y="${ly + laneH / 2 + 4}" class="lane">${esc(lane)}</text>`,
    );
  });
  svg.push(
    `<rect x="${x(history.healedAtMs)}" y="${top}" width="${Math.max(0, x(history.endedAtMs) - x(history.healedAtMs))}" height="${lanes.length * laneH}" class="healed"><title>after the last heal</title></rect>`,
  );

  // Fault windows.
  for (const f of history.faults) {
    const end = f.endMs ?? history.endedAtMs;
    const colour = FAULT_COLOURS[f.kind];
    const label = `${f.kind} ${f.targets.join(', ')} ${((end - f.startMs) / 1000).toFixed(1)} s${f.endMs === undefined ? ' (never healed)' : ''}${f.detail === undefined ? '' : ` — ${f.detail}`}`;
    // A process fault (or the client end of a link) is shaded over the whole lane; the far end of
    // a link only gets a strip at the bottom of its lane.
    const full = new Set(f.targets.map((t) => lanesOf(t)[0] ?? t));
    const strip = new Set(f.targets.flatMap((t) => lanesOf(t).slice(1)).filter((l) => !full.has(l)));
    const w = Math.max(2, x(end) - x(f.startMs));
    for (const lane of lanes) {
      if (!full.has(lane) && !strip.has(lane)) continue;
      const [ry, rh] = full.has(lane) ? [y(lane) + 2, laneH - 4] : [y(lane) + laneH - 8, 6];
      svg.push(
        `<rect x="${x(f.startMs)}" y="${ry}" width="${w}" height="${rh}" fill="${colour}" class="fault"><title>${esc(label)}</title></rect>`,
      );
    }
  }

  // Sink decisions: accepted writes and refusals as ticks on the sink lane.
  for (const d of history.decisions) {
    if (d.kind !== 'write') continue;
    const colour = WRITE_COLOURS[d.outcome] ?? '#000';
    const sy = y('sink');
    svg.push(
      `<line x1="${x(d.atMs)}" y1="${sy + 6}" x2="${x(d.atMs)}" y2="${sy + laneH - 6}" stroke="${colour}" class="decision"><title>${esc(`sink #${d.seq}: write ${d.resource} token ${d.token} (fence ${d.fenceBefore}) by ${d.workerId ?? '?'}: ${d.outcome}`)}</title></line>`,
    );
  }

  // Worker events.
  for (const e of history.events) {
    const ex = x(e.atMs);
    const ey = y(e.process) + laneH / 2;
    const tip = esc(describeEvent(e));
    if (e.kind === 'grant') {
      svg.push(
        `<path d="M${ex - 4},${ey - 11} L${ex + 4},${ey - 11} L${ex},${ey - 4} Z" class="grant"><title>${tip}</title></path>`,
      );
    } else if (e.kind === 'write') {
      const colour = WRITE_COLOURS[e.outcome] ?? '#000';
      const r = e.outcome === 'written' || e.outcome === 'replayed' ? 4 : 5.5;
      svg.push(
        `<circle cx="${ex}" cy="${ey + 3}" r="${r}" fill="${colour}" class="${e.outcome === 'written' || e.outcome === 'replayed' ? 'ok' : 'refused'}"><title>${tip}</title></circle>`,
      );
    } else if (e.kind === 'complete') {
      svg.push(`<rect x="${ex - 2}" y="${ey + 9}" width="4" height="4" class="complete"><title>${tip}</title></rect>`);
    } else if (e.kind === 'lost') {
      svg.push(`<text x="${ex - 3}" y="${ey + 15}" class="lost">×<title>${tip}</title></text>`);
    }
  }

  // Exits.
  for (const ex of history.exits) {
    if (!lanes.includes(ex.process)) continue;
    svg.push(
      `<text x="${x(ex.atMs) - 5}" y="${y(ex.process) + 12}" class="${ex.expected ? 'exit' : 'crash'}">✕<title>${esc(`${ex.process} exited (code ${ex.code ?? '-'}, signal ${ex.signal ?? '-'})${ex.expected ? ' by the runner' : ' BY ITSELF'}`)}</title></text>`,
    );
  }

  // Violations: a red line across every lane, and a marker on the lane it names.
  for (const v of violations) {
    if (v.atMs === undefined) continue;
    const vx = x(v.atMs);
    svg.push(
      `<line x1="${vx}" y1="${top}" x2="${vx}" y2="${top + lanes.length * laneH}" class="violation"><title>${esc(`${v.name}: ${v.message}`)}</title></line>`,
    );
    if (v.process !== undefined && lanes.includes(v.process))
      svg.push(
        `<text x="${vx - 6}" y="${y(v.process) + laneH - 4}" class="vmark">⚠<title>${esc(`${v.name}: ${v.message}`)}</title></text>`,
      );
  }

  const legend = [
    ...Object.entries(FAULT_COLOURS).map(
      ([k, c]) => `<span class="key"><i style="background:${c};opacity:.45"></i>${esc(k)}</span>`,
    ),
    `<span class="key"><i class="tri"></i>grant</span>`,
    ...Object.entries(WRITE_COLOURS).map(
      ([k, c]) => `<span class="key"><i style="background:${c};border-radius:50%"></i>write ${esc(k)}</span>`,
    ),
    `<span class="key"><i style="background:#223"></i>completed</span>`,
    `<span class="key"><i style="background:#d00"></i>violation</span>`,
  ].join('');

  const vrows = violations
    .slice(0, 500)
    .map(
      (v) =>
        `<tr><td class="vname">${esc(v.name)}</td><td>${v.atMs === undefined ? '' : `${((v.atMs - t0) / 1000).toFixed(2)} s`}</td><td>${esc(v.process ?? '')}</td><td>${esc(v.resource ?? '')}</td><td>${esc(v.token ?? '')}</td><td>${esc(v.message)}</td></tr>`,
    )
    .join('');
  const frows = history.faults
    .map(
      (f) =>
        `<tr><td>${((f.startMs - t0) / 1000).toFixed(2)} s</td><td>${f.endMs === undefined ? 'never' : `${((f.endMs - f.startMs) / 1000).toFixed(2)} s`}</td><td>${esc(f.kind)}</td><td>${esc(f.targets.join(', '))}</td><td>${esc(f.detail ?? '')}</td></tr>`,
    )
    .join('');
  const status = summary.ok
    ? '<span class="pass">PASS — 0 violations</span>'
    : `<span class="fail">FAIL — ${violations.length} violation(s)</span>`;

  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>leasehold chaos: ${esc(summary.scenario)} seed ${summary.seed}</title>
<style>
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:18px;margin:0 0 6px} .meta{color:#555;margin-bottom:8px}
.pass{color:#1a7f37;font-weight:600} .fail{color:#c00;font-weight:700}
.scroll{overflow-x:auto;border:1px solid #ccc;background:#fff}
.grid{stroke:#e4e4e4} .tick{font-size:10px;fill:#888} .lane{font-size:12px;fill:#333;font-weight:600}
.lane0{fill:#fff} .lane1{fill:#f4f6f8} .healed{fill:#2a2;opacity:.05}
.fault{opacity:.35} .grant{fill:#2060d0} .ok{stroke:#fff;stroke-width:1} .refused{stroke:#000;stroke-width:1.2}
.complete{fill:#223} .lost{font-size:13px;fill:#c05000;font-weight:700} .decision{stroke-width:1.5;opacity:.8}
.exit{font-size:13px;fill:#000} .crash{font-size:15px;fill:#d00;font-weight:800}
.violation{stroke:#d00;stroke-width:2;stroke-dasharray:4 2} .vmark{font-size:15px;fill:#d00}
.legend{margin:8px 0} .key{display:inline-block;margin-right:12px} .key i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
.key i.tri{width:0;height:0;border-left:6px solid transparent;border-right:6px solid transparent;border-top:8px solid #2060d0;background:none}
table{border-collapse:collapse;margin-top:6px;background:#fff} td,th{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#eee} .vname{color:#c00;font-weight:600;white-space:nowrap} h2{font-size:15px;margin:18px 0 4px}
</style></head><body>
<h1>leasehold chaos — ${esc(summary.scenario)}, seed ${summary.seed}${summary.sabotage === null ? '' : `, sabotage <b>${esc(summary.sabotage)}</b>`}</h1>
${environmentLine(summary)}
<div class="meta">${status} · tasks ${summary.tasks.completed}/${summary.tasks.submitted} completed · ${history.events.filter((e) => e.kind === 'grant').length} grants · ${history.decisions.length} sink decisions · ${history.faults.length} fault windows · total ${((summary.durationsMs.total ?? 0) / 1000).toFixed(1)} s · etcd history ${history.owners === undefined ? 'unavailable' : 'checked'}</div>
<div class="meta">${Object.entries(summary.violationCounts)
    .map(([k, n]) => `<span class="vname">${esc(k)}</span> × ${n}`)
    .join(' · ')}</div>
<div class="legend">${legend}</div>
<div class="scroll"><svg xmlns="http://www.w3.org/2000/svg" width="${left + width + 30}" height="${height}">${svg.join('')}</svg></div>
<h2>Violations</h2>
${violations.length === 0 ? '<p class="pass">None.</p>' : `<table><tr><th>name</th><th>at</th><th>process</th><th>resource</th><th>token</th><th>what</th></tr>${vrows}</table>`}
<h2>Faults</h2>
${faultCounts(summary)}
<table><tr><th>start</th><th>length</th><th>kind</th><th>targets</th><th>detail</th></tr>${frows}</table>
${renderResources(history, summary.resources ?? [])}
</body></html>
`;
}

function describeEvent(e: WorkerEvent): string {
  const base = `${e.process} ${e.kind} ${e.resource} token ${e.token} task ${e.taskId}`;
  switch (e.kind) {
    case 'write':
      return `${base} → ${e.outcome}`;
    case 'lost':
      return `${base}: ${e.reason}`;
    default:
      return base;
  }
}

/** Network mode, sink store, clock; lease bounds, register, stale writes refused. */
function environmentLine(summary: SummaryLike): string {
  const e = summary.environment;
  const parts: string[] = [];
  if (e !== undefined)
    parts.push(
      `network <b>${esc(e.network)}</b>`,
      `sink ${esc(e.sinkStore)}×${e.sinks}`,
      `coordinator clocks ${e.clock ? '<b>faked</b> (libfaketime)' : 'real'}`,
    );
  if (summary.staleWritesRefused !== undefined) parts.push(`${summary.staleWritesRefused} stale writes refused`);
  const l = summary.leaseBounds;
  if (l !== undefined && l !== null)
    parts.push(
      `leases: ${l.judged}/${l.measured} judged against the bound (${l.silentHolders} silent holders, max ${l.maxSilenceToEndMs === undefined ? '-' : Math.round(l.maxSilenceToEndMs)} ms silence→end; ${l.sessionEnds} session ends, min ${l.minSilenceToEndMs === undefined ? '-' : Math.round(l.minSilenceToEndMs)} ms)`,
    );
  const r = summary.register;
  if (r !== undefined && r !== null)
    parts.push(
      `register: ${r.acceptedWrites} increments accepted, values sum ${r.finalValueSum}, ${r.lostUpdates} lost updates`,
    );
  const notes = (e?.notes ?? []).map((n) => `<div class="meta">note: ${esc(n)}</div>`).join('');
  return parts.length === 0 ? notes : `<div class="meta">${parts.join(' · ')}</div>${notes}`;
}

function faultCounts(summary: SummaryLike): string {
  const f = summary.faults;
  if (f === undefined) return '';
  const cells = Object.entries(f)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(
      ([k, n]) =>
        `<span class="key"><i style="background:${(FAULT_COLOURS as Record<string, string | undefined>)[k] ?? '#999'};opacity:.45"></i>${esc(k)} × ${n}</span>`,
    )
    .join('');
  return `<div class="legend">${cells}</div>`;
}
