/**
 * The recorded history of one chaos run: what every process observed, what the sink decided, what
 * etcd stored, and which faults were active when. Plain JSON (tokens and revisions are decimal
 * strings, times are epoch milliseconds from one host clock), so a history can be saved, replayed
 * into the checker and drawn.
 */

/** A write outcome as seen by the worker; `unknown` = timed out or cut off: it may have happened. */
export type WriteOutcome = 'written' | 'replayed' | 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT' | 'unknown';

export interface WorkerEventBase {
  /** Epoch ms (the process' log time). */
  readonly atMs: number;
  /** Process name, e.g. `worker-2` (a restarted worker keeps its name). */
  readonly process: string;
  readonly workerId: string;
  readonly taskId: string;
  readonly resource: string;
  readonly token: string;
}

export type WorkerEvent =
  | (WorkerEventBase & { readonly kind: 'grant' })
  /** The worker is about to send a write (after the SDK's deadline check). */
  | (WorkerEventBase & { readonly kind: 'write-attempt'; readonly resultId: string })
  | (WorkerEventBase & { readonly kind: 'write'; readonly resultId: string; readonly outcome: WriteOutcome })
  /** The coordinator confirmed the completion (`task completed`), with the result id the worker named. */
  | (WorkerEventBase & { readonly kind: 'complete'; readonly resultId?: string | undefined })
  | (WorkerEventBase & { readonly kind: 'lost'; readonly reason: string });

export interface SinkDecision {
  readonly seq: number;
  readonly kind: 'advance' | 'write';
  readonly resource: string;
  readonly token: string;
  readonly fenceBefore: string;
  readonly outcome:
    'advanced' | 'unchanged' | 'written' | 'replayed' | 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT';
  readonly resultId?: string | undefined;
  readonly workerId?: string | undefined;
  readonly atMs: number;
}

/** One owner key's life in etcd: created at `token` (its create revision), deleted at `endRevision`. */
export interface OwnerInterval {
  readonly resource: string;
  readonly token: string;
  /** Revision of the delete; undefined = still present at the end of the run. */
  readonly endRevision: string | undefined;
  readonly workerId?: string | undefined;
  readonly taskId?: string | undefined;
  readonly sessionId?: string | undefined;
  /** The owner key went at the revision its session key went (session expired or closed). */
  readonly endedWithSession?: boolean | undefined;
  /** When the runner's live watch first saw the key created / deleted (epoch ms; no clock fault touches it). */
  readonly startSeenMs?: number | undefined;
  readonly endSeenMs?: number | undefined;
}

export type FaultKind =
  | 'pause'
  | 'kill'
  /** Userspace proxy faults. */
  | 'blackhole'
  | 'one-way'
  | 'reset'
  | 'latency'
  /** An etcd member's inbound peer proxy blackholed (proxy mode). */
  | 'partition-etcd-member'
  /** Kernel faults: nftables rules in network namespaces, netem. */
  | 'nft-drop'
  | 'nft-one-way'
  | 'nft-reject'
  | 'nft-loss'
  | 'netem-delay'
  /** An etcd member (and maybe its coordinator) cut off from the rest, by nftables. */
  | 'partition'
  /** A coordinator's wall clock jumped (libfaketime). */
  | 'clock-jump'
  /** The sink's file system full. */
  | 'disk-full'
  | 'self-pause';

/** Fault kinds that do not disturb the lease path (the lease-bound rules judge ownerships under them). */
export const CLOCK_AND_SELF_FAULTS: ReadonlySet<FaultKind> = new Set<FaultKind>(['clock-jump', 'self-pause']);

export interface FaultWindow {
  readonly id: number;
  readonly kind: FaultKind;
  /** Process or link names the fault applies to. */
  readonly targets: readonly string[];
  readonly startMs: number;
  /** When healed; undefined = never healed (a bug in the run itself). */
  readonly endMs: number | undefined;
  readonly detail?: string;
}

export interface TaskRecord {
  readonly taskId: string;
  readonly resource: string;
  /** Deterministic tasks have one possible payload: `expected`. */
  readonly deterministic: boolean;
  /** A register task: reads the resource's value at the sink and writes value + 1 (`{ register, prev, value }`). */
  readonly register?: boolean;
  readonly expected?: unknown;
  readonly submittedAtMs: number;
  /** The retry policy the submit asked for, complete (no installation default involved). */
  readonly retry?: RetrySpec | undefined;
  /** Submitted with `delayMs`: not grantable before this (the first submit's send time + the delay, host clock). */
  readonly notBeforeMs?: number | undefined;
  /** The handler fails its first attempts on purpose: `failed` is a legal end once its budget is used up. */
  readonly mayFail?: boolean | undefined;
}

/** A task's retry policy as the runner asked for it (see RetryPolicy in @leasehold/protocol). */
export interface RetrySpec {
  readonly maxAttempts: number;
  readonly backoff: {
    readonly initialMs: number;
    readonly multiplier: number;
    readonly maxMs: number;
    readonly jitter: number;
  };
}

/** One ended attempt, as the task record in etcd lists it (`history`); times: the closing coordinator's wall clock. */
export interface AttemptEnd {
  readonly attempt: number;
  readonly workerId: string;
  /** The grant's token (the task key's revision the grant wrote). */
  readonly token: string;
  /** completed | failed | expired | released | abandoned | cancelled */
  readonly outcome: string;
  readonly startedAtMs: number;
  readonly endedAtMs: number;
}

/**
 * One write of a task's record in etcd (`<prefix>tasks/<id>`), every one from revision 1 on. Times
 * are the writing coordinator's wall clock (`Date.now()`, faked under libfaketime).
 */
export interface TaskVersion {
  readonly taskId: string;
  /** The write's revision; for a grant (`lastEvent` granted) it is the attempt's token. */
  readonly revision: string;
  readonly state: string;
  readonly lastEvent?: string | undefined;
  readonly attempts: number;
  readonly notBeforeMs?: number | undefined;
  /** The attempt open after this write (set by a grant). */
  readonly open?: { readonly attempt: number; readonly workerId: string; readonly startedAtMs: number } | undefined;
  /** Attempts this write ended: entries of `history` the previous version did not have. */
  readonly ended: readonly AttemptEnd[];
}

export interface FinalTask {
  readonly taskId: string;
  /** As the admin API last showed it, `removed` when it vanished from the list (retention), `unknown` when never seen. */
  readonly state: string;
  /** For a removed task: the state it was last seen in, if it was seen at all. */
  readonly lastSeenState?: string | undefined;
  /** When the runner first found it gone from the admin API's list (removed by retention or purge). */
  readonly removedSeenAtMs?: number | undefined;
  readonly result?: { readonly resultId: string; readonly token: string } | undefined;
  /** When the runner first saw it completed (or failed, for a task allowed to fail). */
  readonly completedSeenAtMs?: number | undefined;
}

export interface FinalResult {
  readonly resource: string;
  readonly resultId: string;
  readonly token: string;
  readonly workerId: string;
  readonly payload: unknown;
}

export interface ProcessLog {
  readonly process: string;
  readonly text: string;
}

export interface ProcessExit {
  readonly process: string;
  readonly atMs: number;
  readonly code: number | null;
  readonly signal: string | null;
  /** Caused by the runner (a kill nemesis or the final stop). */
  readonly expected: boolean;
}

/** One sample of a process' resources (from /proc). */
export interface ResourceSample {
  readonly process: string;
  readonly pid: number;
  readonly atMs: number;
  readonly rssKb: number;
  readonly fds: number;
}

/** Growth bounds for the resource rules (see checker-resources.ts). */
export interface ResourceBounds {
  /** Ignored at the start of each process incarnation (JIT, caches, pools filling). */
  readonly warmupMs: number;
  /** Length of the first and the last window compared. */
  readonly windowMs: number;
  /** Incarnations shorter than this are only held to the caps. */
  readonly minSpanMs: number;
  /** last-window median RSS <= first-window median × factor + slack. */
  readonly rssFactor: number;
  readonly rssSlackKb: number;
  /** last-window median fds <= first-window median + slack. */
  readonly fdSlack: number;
  readonly rssCapKb: number;
  readonly fdCap: number;
  /** Growth is judged only for these roles (etcd and PostgreSQL grow with stored history by design). */
  readonly judgedPrefixes: readonly string[];
}

/** What the lease-bound rules compare lease lifetimes with. */
export interface LeaseTiming {
  readonly sessionTtlMs: number;
  readonly heartbeatIntervalMs: number;
  /** Slack for timers, event-loop lag and the etcd round trip. */
  readonly marginMs: number;
}

export interface History {
  readonly startedAtMs: number;
  readonly endedAtMs: number;
  /** When the last fault was healed (the completion bound counts from here). */
  readonly healedAtMs: number;
  /** Every task must be completed within this long after `healedAtMs`. */
  readonly completionBoundMs: number;
  readonly tasks: readonly TaskRecord[];
  readonly events: readonly WorkerEvent[];
  readonly faults: readonly FaultWindow[];
  readonly decisions: readonly SinkDecision[];
  /** False when the sink pruned part of its decision log: checks that need all of it are skipped. */
  readonly decisionsComplete: boolean;
  /** Undefined when etcd's history could not be read. */
  readonly owners: readonly OwnerInterval[] | undefined;
  readonly finalTasks: readonly FinalTask[];
  readonly finalResults: readonly FinalResult[];
  readonly logs: readonly ProcessLog[];
  readonly exits: readonly ProcessExit[];
  /** Present when the run measured lease lifetimes (live etcd watch). */
  readonly lease?: LeaseTiming | undefined;
  /** Every write of the workload's task records (etcd history); undefined when it could not be read. */
  readonly taskVersions?: readonly TaskVersion[] | undefined;
  /** The installation's retry policy (tasks submitted without one); undefined when the runner cannot know it. */
  readonly retryDefaults?: RetrySpec | undefined;
  /** The coordinators' wall clocks were faked (libfaketime): `notBeforeMs` is not judged (N8). */
  readonly wallClocksFaked?: boolean | undefined;
  /**
   * Standing offsets of faked wall clocks (libfaketime), ms, by process: such a process' log times
   * are its own clock (host time + offset, + the jump during a `clock-jump` window).
   */
  readonly clockOffsetsMs?: Readonly<Record<string, number>> | undefined;
  /** Present when the run sampled /proc. */
  readonly resources?: readonly ResourceSample[] | undefined;
  readonly resourceBounds?: ResourceBounds | undefined;
}
