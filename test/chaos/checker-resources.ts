/**
 * Resource growth over a long run (the soak), from /proc samples of every process. Per process
 * incarnation (name + pid: a restart starts a new series):
 *
 * - `resource-cap-exceeded`: any sample above the caps (RSS, open fds), for every process;
 * - `resource-rss-growth` / `resource-fd-growth`: for leasehold's own processes (sink, coordinators,
 *   workers) whose incarnation spans at least `minSpanMs`, the median of the last `windowMs` against
 *   the median of the first `windowMs` after `warmupMs`: RSS may grow by `rssFactor` × + `rssSlackKb`,
 *   fds by `fdSlack`. etcd and PostgreSQL keep history (no compaction in chaos runs, so the checker can
 *   read every revision) and are only held to the caps; their figures are reported.
 *
 * Pure.
 */
import type { Violation } from './violation.js';
import type { History, ResourceBounds, ResourceSample } from './history.js';

export const ResourceViolation = {
  RSS_GROWTH: 'resource-rss-growth',
  FD_GROWTH: 'resource-fd-growth',
  CAP_EXCEEDED: 'resource-cap-exceeded',
} as const;

/** The stated bounds (docs/chaos.md "Soak"). */
export const DEFAULT_RESOURCE_BOUNDS: ResourceBounds = {
  warmupMs: 120_000,
  windowMs: 180_000,
  minSpanMs: 900_000,
  rssFactor: 1.5,
  rssSlackKb: 64 * 1024,
  fdSlack: 64,
  rssCapKb: 1536 * 1024,
  fdCap: 4096,
  judgedPrefixes: ['sink', 'coordinator-', 'worker-'],
};

export interface ResourceSeriesStats {
  readonly process: string;
  readonly pid: number;
  readonly samples: number;
  readonly spanMs: number;
  readonly rssKb: { readonly first: number; readonly last: number; readonly max: number };
  readonly fds: { readonly first: number; readonly last: number; readonly max: number };
  /** Growth was judged (long enough, a leasehold process). */
  readonly judged: boolean;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length === 0 ? 0 : s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export function seriesOf(samples: readonly ResourceSample[]): ResourceSample[][] {
  const by = new Map<string, ResourceSample[]>();
  for (const s of samples) {
    const key = `${s.process}#${s.pid}`;
    by.set(key, [...(by.get(key) ?? []), s]);
  }
  return [...by.values()].map((list) => list.sort((a, b) => a.atMs - b.atMs));
}

export function checkResources(history: History): { violations: Violation[]; stats: ResourceSeriesStats[] } {
  const samples = history.resources;
  if (samples === undefined || samples.length === 0) return { violations: [], stats: [] };
  const b = history.resourceBounds ?? DEFAULT_RESOURCE_BOUNDS;
  const out: Violation[] = [];
  const stats: ResourceSeriesStats[] = [];
  for (const series of seriesOf(samples)) {
    const first = series[0]!;
    const last = series.at(-1)!;
    const name = first.process;
    const spanMs = last.atMs - first.atMs;
    for (const s of series) {
      if (s.rssKb > b.rssCapKb || s.fds > b.fdCap) {
        out.push({
          name: ResourceViolation.CAP_EXCEEDED,
          message: `${name} (pid ${s.pid}): RSS ${Math.round(s.rssKb / 1024)} MiB, ${s.fds} fds (caps ${Math.round(b.rssCapKb / 1024)} MiB, ${b.fdCap} fds)`,
          atMs: s.atMs,
          process: name,
        });
        break;
      }
    }
    const judged = b.judgedPrefixes.some((p) => name.startsWith(p)) && spanMs >= b.minSpanMs;
    const head = series.filter(
      (s) => s.atMs >= first.atMs + b.warmupMs && s.atMs < first.atMs + b.warmupMs + b.windowMs,
    );
    const tail = series.filter((s) => s.atMs > last.atMs - b.windowMs);
    const rss0 = median(head.map((s) => s.rssKb));
    const rss1 = median(tail.map((s) => s.rssKb));
    const fd0 = median(head.map((s) => s.fds));
    const fd1 = median(tail.map((s) => s.fds));
    if (judged && head.length > 0 && tail.length > 0) {
      const rssBound = rss0 * b.rssFactor + b.rssSlackKb;
      if (rss1 > rssBound)
        out.push({
          name: ResourceViolation.RSS_GROWTH,
          message: `${name} (pid ${first.pid}): RSS median ${Math.round(rss0 / 1024)} MiB after warm-up, ${Math.round(rss1 / 1024)} MiB at the end (bound ${Math.round(rssBound / 1024)} MiB over ${Math.round(spanMs / 60_000)} min)`,
          atMs: last.atMs,
          process: name,
        });
      if (fd1 > fd0 + b.fdSlack)
        out.push({
          name: ResourceViolation.FD_GROWTH,
          message: `${name} (pid ${first.pid}): ${fd0} open fds after warm-up, ${fd1} at the end (bound +${b.fdSlack})`,
          atMs: last.atMs,
          process: name,
        });
    }
    stats.push({
      process: name,
      pid: first.pid,
      samples: series.length,
      spanMs,
      rssKb: {
        first: head.length > 0 ? rss0 : first.rssKb,
        last: tail.length > 0 ? rss1 : last.rssKb,
        max: Math.max(...series.map((s) => s.rssKb)),
      },
      fds: {
        first: head.length > 0 ? fd0 : first.fds,
        last: tail.length > 0 ? fd1 : last.fds,
        max: Math.max(...series.map((s) => s.fds)),
      },
      judged: judged && head.length > 0 && tail.length > 0,
    });
  }
  return { violations: out, stats };
}
