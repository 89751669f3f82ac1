/** The chaos runner's options (`runChaos`, the CLI's flags, profiles). */
import type { NetworkMode } from '../harness/chaos-topology.js';

/**
 * Test-only breakage the checker must catch: the sink skips its fence check (`skip-fence`), the
 * coordinator grants before it advances (`grant-before-advance`), the coordinators' monotonic
 * clock follows libfaketime too (`fake-monotonic`: clock jumps then move lease deadlines), or the
 * coordinator stores every task with an unlimited, zero-backoff policy instead of the submitted one
 * (`ignore-retry-policy`). Shipped code has no switch for any of them: the runner starts the broken
 * daemon through a test entry point of test/chaos/sabotage/ that injects a lying collaborator
 * (`sabotageLaunch` in runner.ts); `fake-monotonic` is the runner's own (libfaketime's settings).
 */
export type Sabotage = 'skip-fence' | 'grant-before-advance' | 'fake-monotonic' | 'ignore-retry-policy';
export const SABOTAGES: readonly Sabotage[] = [
  'skip-fence',
  'grant-before-advance',
  'fake-monotonic',
  'ignore-retry-policy',
];

export interface ChaosOptions {
  readonly seed: number;
  /** Length of the fault phase (random mix). Default 60 s. */
  readonly durationMs?: number;
  /** Default `random-mix`. */
  readonly scenario?: string;
  readonly etcdMembers?: number;
  readonly sabotage?: Sabotage | undefined;
  readonly coordinators?: number;
  readonly workers?: number;
  readonly tasks?: number;
  readonly resources?: number;
  /** Share of tasks whose worker pauses past its lease before writing. Default 0.15. */
  readonly pauseRate?: number;
  /** Mean time between faults. Default 5 s. */
  readonly intervalMs?: number;
  readonly sessionTtlMs?: number;
  /** After the last heal, every task must complete within this. Default 45 s. */
  readonly completionBoundMs?: number;
  /** Default `chaos-results/<scenario>-seed<seed>-<time>` in the repository. */
  readonly outDir?: string;
  /** Progress lines (one per second); default: to stderr. `false` = silent. */
  readonly progress?: boolean | ((line: string) => void);
  /** `proxy` (default), `netns` or `mixed` (root). */
  readonly network?: NetworkMode;
  /** `sqlite` (default) or `postgres`. */
  readonly sinkStore?: 'sqlite' | 'postgres';
  /** Sink replicas (PostgreSQL only). Default 1. */
  readonly sinks?: number;
  /** Coordinators under libfaketime, their clocks jumping in the random mix. */
  readonly clock?: boolean;
  /** Sample /proc every this many ms (0 / undefined = off). */
  readonly resourceSampleMs?: number;
  /** Processes the random mix never kills. */
  readonly protect?: readonly string[];
  /** Slack of the lease-bound rules. Default max(1000, TTL / 2). */
  readonly leaseMarginMs?: number;
  /** When the network mode or clock faults are unavailable here: skip the run (default) or fall back and say so. */
  readonly unavailable?: 'skip' | 'fallback';
  /** A deployed cluster (target file, see docs/chaos.md) instead of a local one. */
  readonly target?: string;
  /** No TLS on any link (local debugging only: says so loudly). Default: TLS and per-worker credentials. */
  readonly plaintext?: boolean;
  /** The profile the options came from (recorded only). */
  readonly profile?: string;
  /**
   * Extra pending tasks submitted before the faults start and kept for the whole run (delayed past
   * its end, on resources of their own: backlog.ts), so the checked workload runs against a
   * coordinator that indexes, snapshots, lists and pages this many more tasks. Default 0.
   */
  readonly backlog?: number;
  /** Extra environment for every coordinator of a local cluster (e.g. a short retention age). */
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
}

/** `90s`, `10m`, `1h`, `1500ms` or a bare number of seconds → milliseconds. */
export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null) throw new Error(`not a duration: ${text} (use e.g. 90s, 10m, 1h)`);
  const n = Number(m[1]);
  const unit = m[2] ?? 's';
  return Math.round(n * (unit === 'ms' ? 1 : unit === 's' ? 1_000 : unit === 'm' ? 60_000 : 3_600_000));
}
