/**
 * What the web console's API (`/ui/api/...`) sends: JSON bodies and server-sent events. ONE file,
 * types only, for both sides: the page (`ui/app.ts`) and the server (`src/service/console/`,
 * `src/http/console/`) import it, so they cannot drift apart. A declaration file: the server's
 * program may take it from outside its `src/` root (no code is emitted for it), and the package
 * ships it (`files`) for the server's declarations that name these types.
 */

/** One row of the resources view: the resource's live task (else its latest), holder and fence. */
export interface ConsoleResourceRow {
  readonly resource: string;
  readonly taskId: string | null;
  /** The task's state (leased, pending, delayed, completed, failed, cancelled). */
  readonly state: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly owner: {
    readonly workerId: string;
    readonly sessionId: string;
    readonly coordinatorId: string | null;
  } | null;
  /** The holder's fencing token (null when nobody holds the resource). */
  readonly token: string | null;
  /** The sink's fence as last seen by this coordinator (null: not known yet). */
  readonly fence: string | null;
}

/** One row of the tasks view. */
export interface ConsoleTaskRow {
  readonly taskId: string;
  readonly resource: string;
  /** Its queue (`default` for tasks submitted without one). */
  readonly queue: string;
  readonly state: string;
  readonly attempts: number;
  readonly maxAttempts: number;
  readonly lastEvent: string;
  readonly lastError: string | null;
  /** Wall-clock time of the task's last change (epoch ms). */
  readonly atMs: number;
}

/** One worker session, grouped by the coordinator that serves it. */
export interface ConsoleSessionRow {
  readonly sessionId: string;
  readonly workerId: string;
  readonly coordinatorId: string;
  readonly ending: boolean;
  /** Resources it holds. */
  readonly leases: number;
  /** Time left before the session (and its leases) expires; known only on its own coordinator. */
  readonly remainingMs: number | null;
}

export interface ConsolePage<T> {
  /** Rows matching the filter (all pages). */
  readonly total: number;
  readonly offset: number;
  readonly items: readonly T[];
  /** Rows per state over the whole filter-less set. */
  readonly counts: Readonly<Record<string, number>>;
  /** The console keeps at most CONSOLE_MAX_TASKS tasks: some are not shown. */
  readonly truncated?: true;
}

/**
 * One line of the live stream: a task change (grant, completion, expiry, ...) or a sink decision or
 * refusal. A stale refusal carries both tokens: `token` (the old holder's) and `fence` (the newer
 * holder's, which refused it).
 */
export interface ConsoleFeedItem {
  /** Increasing per coordinator process. */
  readonly id: number;
  readonly atMs: number;
  readonly source: 'task' | 'sink';
  /** Task event kind (granted, expired, ...), `advance`, `write`, a refusal code (STALE_TOKEN, ...). */
  readonly kind: string;
  readonly resource: string | null;
  readonly taskId: string | null;
  readonly workerId: string | null;
  readonly token: string | null;
  readonly fence: string | null;
  /** A write or advance refused because a newer token holds the resource. */
  readonly stale: boolean;
  /** A problem worth a colour: refusals, expiries, failures. */
  readonly problem: boolean;
  readonly text: string;
}

/** The per-resource story, oldest first. */
export interface ConsoleTimeline {
  readonly resource: string;
  readonly row: ConsoleResourceRow | null;
  readonly entries: readonly ConsoleTimelineEntry[];
}

export interface ConsoleTimelineEntry {
  readonly atMs: number;
  readonly kind: string;
  readonly workerId: string | null;
  readonly token: string | null;
  readonly stale: boolean;
  readonly problem: boolean;
  readonly text: string;
}

/** `event: hello` on every (re)connect of the stream. */
export interface ConsoleHello {
  readonly coordinatorId: string;
  readonly sinkConnected: boolean;
  /** Recent feed items, oldest first (the stream goes on after them). */
  readonly recent: readonly ConsoleFeedItem[];
}

/** `event: leases` every second: time left of the sessions this coordinator serves. */
export interface ConsoleLeases {
  readonly coordinatorId: string;
  readonly remainingMs: Readonly<Record<string, number>>;
}
