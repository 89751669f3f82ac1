/** The chaos runner's options (`runChaos`, the CLI's flags, profiles). */
import type { NetworkMode } from '../harness/chaos-topology.js';

/**
 * Test-only breakage the checker must catch: the sink skips its fence check (`skip-fence`), the
 * coordinator grants before it advances (`grant-before-advance`), or the coordinators' monotonic
 * clock follows libfaketime too (`fake-monotonic`: clock jumps then move lease deadlines).
 */
export type Sabotage = 'skip-fence' | 'grant-before-advance' | 'fake-monotonic';
export const SABOTAGES: readonly Sabotage[] = ['skip-fence', 'grant-before-advance', 'fake-monotonic'];

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
  /** The profile the options came from (recorded only). */
  readonly profile?: string;
}
