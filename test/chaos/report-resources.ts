/**
 * The resource part of the HTML report: per process incarnation, RSS and open fds over the run as
 * inline SVG sparklines (the fault-free warm-up and the two compared windows marked), with first /
 * last / max figures and whether growth was judged. Pure string building, no scripts.
 */
import { seriesOf, type ResourceSeriesStats } from './checker-resources.js';
import type { History, ResourceSample } from './history.js';

const esc = (s: string): string =>
  s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function sparkline(
  series: readonly ResourceSample[],
  value: (s: ResourceSample) => number,
  t0: number,
  span: number,
  colour: string,
): string {
  const w = 360;
  const h = 40;
  const max = Math.max(1, ...series.map(value));
  const pts = series
    .map((s) => `${(((s.atMs - t0) / span) * w).toFixed(1)},${(h - (value(s) / max) * (h - 4) - 2).toFixed(1)}`)
    .join(' ');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}" class="spark"><polyline points="${pts}" fill="none" stroke="${colour}" stroke-width="1.5"/></svg>`;
}

export function renderResources(history: History, stats: readonly ResourceSeriesStats[]): string {
  const samples = history.resources;
  if (samples === undefined || samples.length === 0) return '';
  const t0 = history.startedAtMs;
  const span = Math.max(1_000, history.endedAtMs - t0);
  const byKey = new Map(stats.map((s) => [`${s.process}#${s.pid}`, s]));
  const b = history.resourceBounds;
  const rows = seriesOf(samples)
    .sort((x, y) => x[0]!.process.localeCompare(y[0]!.process, 'en', { numeric: true }) || x[0]!.atMs - y[0]!.atMs)
    .map((series) => {
      const first = series[0]!;
      const s = byKey.get(`${first.process}#${first.pid}`);
      const mib = (kb: number | undefined) => (kb === undefined ? '' : (kb / 1024).toFixed(1));
      return (
        `<tr><td>${esc(first.process)}</td><td>${first.pid}</td><td>${series.length}</td>` +
        `<td>${((series.at(-1)!.atMs - first.atMs) / 60_000).toFixed(1)} min</td>` +
        `<td>${sparkline(series, (x) => x.rssKb, t0, span, '#3060c0')}</td>` +
        `<td>${mib(s?.rssKb.first)} → ${mib(s?.rssKb.last)} (max ${mib(s?.rssKb.max)})</td>` +
        `<td>${sparkline(series, (x) => x.fds, t0, span, '#c06030')}</td>` +
        `<td>${s?.fds.first ?? ''} → ${s?.fds.last ?? ''} (max ${s?.fds.max ?? ''})</td>` +
        `<td>${s?.judged === true ? 'yes' : 'caps only'}</td></tr>`
      );
    })
    .join('');
  const bounds =
    b === undefined
      ? ''
      : `<p class="meta">Growth is judged for ${esc(b.judgedPrefixes.join(', '))} incarnations of at least ${b.minSpanMs / 60_000} min: the median of the last ${b.windowMs / 60_000} min against the median of the first ${b.windowMs / 60_000} min after a ${b.warmupMs / 60_000} min warm-up; RSS may grow ×${b.rssFactor} + ${b.rssSlackKb / 1024} MiB, open fds + ${b.fdSlack}. Every sample of every process: RSS ≤ ${b.rssCapKb / 1024} MiB, fds ≤ ${b.fdCap}. Sparklines span the whole run, each scaled to its own maximum.</p>`;
  return `<h2>Resources (/proc, every process)</h2>${bounds}
<table><tr><th>process</th><th>pid</th><th>samples</th><th>span</th><th>RSS</th><th>RSS MiB (first → last median)</th><th>open fds</th><th>fds (first → last median)</th><th>growth judged</th></tr>${rows}</table>`;
}
