/**
 * Lease lifetimes against the monotonic bound. The coordinator judges a session by its own monotonic
 * clock: it ends a session `sessionTtlMs` after the last heartbeat, never earlier, never much later,
 * whatever its wall clock says. From the runner's view (a live watch of the owner and session keys
 * on every etcd member, and the workers' self-pause windows, all on the host clock no fault moves):
 *
 * - `lease-outlived-bound`: the holder went silent at P (the chaos handler stopped the whole worker
 *   for longer than the TTL), yet its ownership ended later than P + TTL + margin;
 * - `lease-cut-short`: an ownership ended with its session (expiry) although its holder had not
 *   been silent for TTL − heartbeat interval − margin before the end.
 *
 * Only ownerships that no other fault could have delayed or ended are judged: no fault window that
 * touches the holder, a coordinator or an etcd member (process, link or partition) may overlap
 * [grant − TTL − margin, end + margin]. Clock jumps and self-pauses are exactly what is under test,
 * so they do not exclude. Pure; the counts of judged ownerships go to the summary.
 */
import type { Violation } from './violation.js';
import type { FaultWindow, History, OwnerInterval } from './history.js';

export const LeaseViolation = {
  OUTLIVED_BOUND: 'lease-outlived-bound',
  CUT_SHORT: 'lease-cut-short',
} as const;

export interface LeaseBoundStats {
  /** Ownerships with both ends seen live. */
  readonly measured: number;
  /** Of those, ownerships no other fault could disturb. */
  readonly judged: number;
  /** Judged ownerships whose holder went silent past the TTL (the outlived rule applies). */
  readonly silentHolders: number;
  /** Judged ownerships ended with their session (the cut-short rule applies). */
  readonly sessionEnds: number;
  /** Longest judged silence-to-end, ms (outlived rule), and shortest (cut-short rule). */
  readonly maxSilenceToEndMs: number | undefined;
  readonly minSilenceToEndMs: number | undefined;
}

/** Processes a fault target touches: `a->b` touches a and b, `etcd-peer` is etcd. */
function touched(target: string): string[] {
  return target.split('->').map((p) => (p === 'etcd-peer' ? 'etcd-m*' : p));
}

function disturbs(f: FaultWindow, holder: string): boolean {
  if (f.kind === 'clock-jump' || f.kind === 'self-pause') return false;
  return f.targets.some((t) =>
    touched(t).some((p) => p === holder || p.startsWith('coordinator-') || p.startsWith('etcd-m')),
  );
}

const overlaps = (f: FaultWindow, from: number, to: number, endOfRun: number): boolean =>
  f.startMs <= to && (f.endMs ?? endOfRun) >= from;

export function checkLeaseBounds(history: History): { violations: Violation[]; stats: LeaseBoundStats } {
  const empty = {
    measured: 0,
    judged: 0,
    silentHolders: 0,
    sessionEnds: 0,
    maxSilenceToEndMs: undefined,
    minSilenceToEndMs: undefined,
  };
  const timing = history.lease;
  if (timing === undefined || history.owners === undefined) return { violations: [], stats: empty };
  const { sessionTtlMs: ttl, heartbeatIntervalMs: hb, marginMs: margin } = timing;
  const silences = new Map<string, FaultWindow[]>();
  for (const f of history.faults) {
    if (f.kind !== 'self-pause') continue;
    for (const t of f.targets) silences.set(t, [...(silences.get(t) ?? []), f]);
  }
  const out: Violation[] = [];
  let measured = 0;
  let judged = 0;
  let silentHolders = 0;
  let sessionEnds = 0;
  let maxGap: number | undefined;
  let minGap: number | undefined;
  for (const o of history.owners) {
    const start = o.startSeenMs;
    const end = o.endSeenMs;
    const holder = o.workerId;
    if (start === undefined || end === undefined || holder === undefined) continue;
    measured += 1;
    if (
      history.faults.some(
        (f) => disturbs(f, holder) && overlaps(f, start - ttl - margin, end + margin, history.endedAtMs),
      )
    )
      continue;
    judged += 1;
    const base = { atMs: end, process: holder, resource: o.resource, token: o.token, taskId: o.taskId };
    const mine = silences.get(holder) ?? [];
    // Outlived: a silence that began during the ownership and lasted past the TTL must end it by P + TTL + margin.
    const long = mine.find(
      (w) => w.startMs >= start && w.startMs <= end && (w.endMs ?? history.endedAtMs) - w.startMs >= ttl + margin,
    );
    if (long !== undefined) {
      silentHolders += 1;
      const gap = end - long.startMs;
      maxGap = Math.max(maxGap ?? gap, gap);
      if (gap > ttl + margin)
        out.push({
          name: LeaseViolation.OUTLIVED_BOUND,
          message: `${describe(o)}: ${holder} went silent at +${Math.round(long.startMs - start)} ms and the ownership ended ${Math.round(gap)} ms later (bound: TTL ${ttl} + margin ${margin} ms)`,
          ...base,
        });
    }
    // Cut short: a session may end only after TTL of silence (the last heartbeat may precede the silence by hb).
    if (o.endedWithSession === true) {
      sessionEnds += 1;
      const need = ttl - hb - margin;
      // A silence still going on (or just over) when the session ended.
      const silence = mine
        .filter((w) => w.startMs <= end && (w.endMs ?? history.endedAtMs) >= end - margin)
        .map((w) => end - w.startMs);
      const gap = silence.length === 0 ? undefined : Math.max(...silence);
      if (gap !== undefined) minGap = Math.min(minGap ?? gap, gap);
      if (gap === undefined || gap < need)
        out.push({
          name: LeaseViolation.CUT_SHORT,
          message:
            gap === undefined
              ? `${describe(o)}: ended with its session although ${holder} was never silent (no fault touched it)`
              : `${describe(o)}: ended with its session ${Math.round(gap)} ms after ${holder} went silent (needs >= TTL ${ttl} - heartbeat ${hb} - margin ${margin} ms)`,
          ...base,
        });
    }
  }
  return {
    violations: out,
    stats: { measured, judged, silentHolders, sessionEnds, maxSilenceToEndMs: maxGap, minSilenceToEndMs: minGap },
  };
}

function describe(o: OwnerInterval): string {
  return `${o.resource} token ${o.token}${o.taskId === undefined ? '' : ` (task ${o.taskId})`}`;
}
