/**
 * The summary of a chaos run (`summary.json`): what ran, what happened, what the checker found.
 */
import type { NetworkMode } from '../harness/chaos-topology.js';
import type { BacklogCount, BacklogStats } from './backlog.js';
import type { LeaseBoundStats } from './checker-leases.js';
import type { RegisterStats } from './checker-register.js';
import type { RetryStats } from './checker-retries.js';
import type { ResourceSeriesStats } from './checker-resources.js';
import type { ChaosOptions, Sabotage } from './options.js';
import type { Violation } from './violation.js';

export interface ChaosSummary {
  readonly ok: boolean;
  /** Set when the run could not happen here (e.g. netns without root); `ok` is then true. */
  readonly skipped?: string;
  readonly scenario: string;
  readonly seed: number;
  readonly sabotage: Sabotage | null;
  readonly options: Record<string, unknown>;
  /** What ran: network mode, sink store, clock, which fault mechanisms existed, and what fell back. */
  readonly environment: {
    readonly network: NetworkMode | 'target';
    /** TLS on every link and per-worker credentials (false: --plaintext; null: a target's own settings). */
    readonly tls: boolean | null;
    readonly sinkStore: string;
    readonly sinks: number;
    readonly clock: boolean;
    readonly capabilities: Record<string, boolean>;
    readonly notes: readonly string[];
  };
  readonly startedAt: string;
  readonly durationsMs: {
    readonly startup: number;
    /** Submitting the `--backlog` (0 without one). */
    readonly backlog: number;
    readonly scenario: number;
    readonly recovery: number;
    readonly collect: number;
    readonly total: number;
  };
  readonly schedule: readonly { atMs: number; durationMs: number; fault: string }[];
  readonly faults: Record<string, number>;
  /** `failed`: tasks whose handler fails on purpose and whose attempt budget ran out (judged by the checker). */
  readonly tasks: { readonly submitted: number; readonly completed: number; readonly failed: number };
  readonly grants: number;
  readonly workerWrites: Record<string, number>;
  readonly sinkDecisions: Record<string, number>;
  /** Writes the sink refused as stale (STALE_TOKEN) and advances it refused (late grants). */
  readonly staleWritesRefused: number;
  readonly lateAdvancesRefused: number;
  readonly etcdHistory: boolean;
  readonly leaseBounds: LeaseBoundStats | null;
  readonly register: RegisterStats | null;
  readonly retries: RetryStats | null;
  readonly resources: readonly ResourceSeriesStats[];
  /** `--backlog N`: how it was submitted, what was still listed at the end, grants of it (0). */
  readonly backlog: (BacklogStats & { readonly atEnd: BacklogCount | null; readonly grantedDuringRun: number }) | null;
  /** What the scenario recorded for its own expectations (e.g. the disk-full refusals). */
  readonly scenarioNotes: Record<string, unknown>;
  readonly violationCounts: Record<string, number>;
  /** The first 200. */
  readonly violations: readonly Violation[];
  readonly files: {
    readonly summary: string;
    readonly history: string;
    readonly timeline: string;
    readonly logs: string;
  };
  readonly error?: string;
}

/** The summary of a run that could not happen here (`ok`, with the reason in `skipped`). */
export function skippedSummary(
  base: Pick<ChaosSummary, 'scenario' | 'seed' | 'sabotage' | 'startedAt' | 'files'>,
  reason: string,
  options: ChaosOptions,
): ChaosSummary {
  return {
    ...base,
    ok: true,
    skipped: reason,
    options: { profile: options.profile ?? null },
    environment: {
      network: options.network ?? 'proxy',
      tls: options.target === undefined ? options.plaintext !== true : null,
      sinkStore: options.sinkStore ?? 'sqlite',
      sinks: options.sinks ?? 1,
      clock: false,
      capabilities: {},
      notes: [reason],
    },
    durationsMs: { startup: 0, backlog: 0, scenario: 0, recovery: 0, collect: 0, total: 0 },
    schedule: [],
    faults: {},
    tasks: { submitted: 0, completed: 0, failed: 0 },
    grants: 0,
    workerWrites: {},
    sinkDecisions: {},
    staleWritesRefused: 0,
    lateAdvancesRefused: 0,
    etcdHistory: false,
    leaseBounds: null,
    register: null,
    retries: null,
    resources: [],
    backlog: null,
    scenarioNotes: {},
    violationCounts: {},
    violations: [],
  };
}
