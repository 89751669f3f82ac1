/**
 * The web console's picture of the cluster, kept in memory from one store snapshot plus the watch
 * feed's revision groups: tasks, owner keys and sessions, with the sink's fences as its decisions
 * arrive. Pure (no I/O, no clock: `nowMs` is passed in); the read model (console-read-model.ts)
 * feeds it.
 *
 * Views are filtered and paged here, on the server, so a browser never receives 10k rows: it asks
 * for the window it shows.
 */
import { taskStateRank, type RetryPolicy, type SinkEvent } from '@leasehold/protocol';
import type {
  ConsolePage,
  ConsoleResourceRow,
  ConsoleSessionRow,
  ConsoleTaskRow,
  ConsoleTimelineEntry,
} from '../../../ui/console-api.js';
import { lastEventOf, policyOf, viewState } from '../../core/lifecycle.js';
import { queueOf, type AttemptRecord, type TaskRecord } from '../../core/task-record.js';
import type { StoredOwner, StoredSession } from '../../store/port.js';

/** What the console keeps of a task: its record (layout v2 shape) and revision, nothing read on demand. */
export interface ConsoleTask {
  readonly record: TaskRecord;
  readonly modRevision: bigint;
}

/**
 * Most tasks the console keeps in memory (a bound in count and, records being bounded, in bytes:
 * about 1 KiB each). Past it, tasks not seen yet are left out and the views say `truncated`.
 */
export const CONSOLE_MAX_TASKS = 50_000;

export interface ResourceFilter {
  /** Substring of the resource id, task id or worker id. */
  readonly q?: string | undefined;
  readonly state?: string | undefined;
  /** Tasks view: this queue only (exact name). */
  readonly queue?: string | undefined;
  readonly offset: number;
  readonly limit: number;
}

export class ConsoleView {
  readonly #tasks = new Map<string, ConsoleTask>();
  #truncated = false;
  readonly #byResource = new Map<string, Set<string>>();
  readonly #owners = new Map<string, StoredOwner>();
  readonly #sessions = new Map<string, StoredSession>();
  readonly #fences = new Map<string, bigint>();
  readonly #defaults: RetryPolicy;
  #sortedResources: string[] | undefined;

  constructor(defaults: RetryPolicy) {
    this.#defaults = defaults;
  }

  reset(tasks: readonly ConsoleTask[], owners: readonly StoredOwner[], sessions: readonly StoredSession[]): void {
    this.beginReset();
    for (const t of tasks) this.applyTask(t.record.taskId, t);
    this.endReset(owners, sessions);
  }

  /** Start a reset: tasks come next ({@link applyTask}), then {@link endReset}. */
  beginReset(): void {
    this.#tasks.clear();
    this.#byResource.clear();
    this.#truncated = false;
    this.#sortedResources = undefined;
  }

  endReset(owners: readonly StoredOwner[], sessions: readonly StoredSession[]): void {
    this.#owners.clear();
    this.#sessions.clear();
    for (const o of owners) this.#owners.set(o.resource, o);
    for (const s of sessions) this.#sessions.set(s.sessionId, s);
    this.#sortedResources = undefined;
  }

  /** Tasks were left out ({@link CONSOLE_MAX_TASKS}). */
  get truncated(): boolean {
    return this.#truncated;
  }

  get taskCount(): number {
    return this.#tasks.size;
  }

  applyTask(taskId: string, stored: ConsoleTask | undefined): void {
    // A slim copy: never the stored value or a v1 record's payload.
    const task = stored === undefined ? undefined : { record: stored.record, modRevision: stored.modRevision };
    if (task !== undefined && !this.#tasks.has(taskId) && this.#tasks.size >= CONSOLE_MAX_TASKS) {
      this.#truncated = true;
      return;
    }
    const before = this.#tasks.get(taskId);
    if (before !== undefined && before.record.resource !== task?.record.resource) {
      const set = this.#byResource.get(before.record.resource);
      set?.delete(taskId);
      if (set?.size === 0) {
        this.#byResource.delete(before.record.resource);
        this.#sortedResources = undefined;
      }
    }
    if (task === undefined) {
      this.#tasks.delete(taskId);
      return;
    }
    this.#tasks.set(taskId, task);
    let set = this.#byResource.get(task.record.resource);
    if (set === undefined) {
      set = new Set();
      this.#byResource.set(task.record.resource, set);
      this.#sortedResources = undefined;
    }
    set.add(taskId);
  }

  applyOwner(resource: string, owner: StoredOwner | undefined): void {
    if (owner === undefined) this.#owners.delete(resource);
    else this.#owners.set(resource, owner);
  }

  applySession(sessionId: string, session: StoredSession | undefined): void {
    if (session === undefined) this.#sessions.delete(sessionId);
    else this.#sessions.set(sessionId, session);
  }

  /** What a sink event says about a fence (advances set it; every decision shows it). */
  applySink(event: SinkEvent): void {
    if (event.type !== 'decision') return;
    const seen = event.kind === 'advance' && event.outcome === 'advanced' ? event.token : event.fenceBefore;
    const fence = BigInt(seen);
    const known = this.#fences.get(event.resource);
    if (known === undefined || fence > known) this.#fences.set(event.resource, fence);
  }

  setFence(resource: string, fence: bigint): void {
    const known = this.#fences.get(resource);
    if (known === undefined || fence > known) this.#fences.set(resource, fence);
  }

  hasFence(resource: string): boolean {
    return this.#fences.has(resource);
  }

  task(taskId: string): ConsoleTask | undefined {
    return this.#tasks.get(taskId);
  }

  tasksOf(resource: string): ConsoleTask[] {
    return [...(this.#byResource.get(resource) ?? [])]
      .map((id) => this.#tasks.get(id))
      .filter((t): t is ConsoleTask => t !== undefined);
  }

  taskRow(task: ConsoleTask, nowMs: number): ConsoleTaskRow {
    const r = task.record;
    const leased = r.state === 'pending' && this.#owners.get(r.resource)?.record.taskId === r.taskId;
    return {
      taskId: r.taskId,
      resource: r.resource,
      queue: queueOf(r),
      state: viewState(r, leased, nowMs),
      attempts: r.attempts,
      maxAttempts: policyOf(r, this.#defaults).maxAttempts,
      lastEvent: lastEventOf(r),
      lastError: r.lastError === undefined ? null : `${r.lastError.name}: ${r.lastError.message}`,
      atMs: r.atMs ?? r.createdAtMs ?? 0,
    };
  }

  resourceRow(resource: string, nowMs: number): ConsoleResourceRow | undefined {
    const owner = this.#owners.get(resource);
    let best: ConsoleTaskRow | undefined;
    for (const t of this.tasksOf(resource)) {
      const row = this.taskRow(t, nowMs);
      if (
        best === undefined ||
        taskStateRank(row.state) < taskStateRank(best.state) ||
        (taskStateRank(row.state) === taskStateRank(best.state) && row.atMs > best.atMs)
      ) {
        best = row;
      }
    }
    if (best === undefined && owner === undefined) return undefined;
    const fence = this.#fences.get(resource);
    return {
      resource,
      taskId: owner?.record.taskId ?? best?.taskId ?? null,
      state: owner === undefined ? (best?.state ?? 'free') : 'leased',
      attempts: best?.attempts ?? 0,
      maxAttempts: best?.maxAttempts ?? this.#defaults.maxAttempts,
      owner:
        owner === undefined
          ? null
          : {
              workerId: owner.record.workerId,
              sessionId: owner.record.sessionId,
              coordinatorId: this.#sessions.get(owner.record.sessionId)?.record.coordinatorId ?? null,
            },
      token: owner === undefined ? null : owner.token.toString(),
      fence: fence === undefined ? null : fence.toString(),
    };
  }

  /** The resources view: filtered on the server, sorted by id, one window of it. */
  resources(filter: ResourceFilter, nowMs: number): ConsolePage<ConsoleResourceRow> {
    this.#sortedResources ??= [...new Set([...this.#byResource.keys(), ...this.#owners.keys()])].sort();
    const q = filter.q?.toLowerCase();
    const counts: Record<string, number> = {};
    const matched: ConsoleResourceRow[] = [];
    for (const resource of this.#sortedResources) {
      const row = this.resourceRow(resource, nowMs);
      if (row === undefined) continue;
      counts[row.state] = (counts[row.state] ?? 0) + 1;
      if (filter.state !== undefined && row.state !== filter.state) continue;
      if (q !== undefined && !matchesResource(row, q)) continue;
      matched.push(row);
    }
    return this.#page(matched, filter, counts);
  }

  /** The tasks view: filtered by queue, state and text, latest change first (counts: of the queue's tasks). */
  tasks(filter: ResourceFilter, nowMs: number): ConsolePage<ConsoleTaskRow> {
    const q = filter.q?.toLowerCase();
    const counts: Record<string, number> = {};
    const matched: ConsoleTaskRow[] = [];
    for (const t of this.#tasks.values()) {
      const row = this.taskRow(t, nowMs);
      if (filter.queue !== undefined && row.queue !== filter.queue) continue;
      counts[row.state] = (counts[row.state] ?? 0) + 1;
      if (filter.state !== undefined && row.state !== filter.state) continue;
      if (q !== undefined && !row.taskId.toLowerCase().includes(q) && !row.resource.toLowerCase().includes(q)) continue;
      matched.push(row);
    }
    matched.sort((a, b) => b.atMs - a.atMs || (a.taskId < b.taskId ? -1 : 1));
    return this.#page(matched, filter, counts);
  }

  /** The window `filter` asks for of the `matched` rows, with the per-state `counts`. */
  #page<T>(matched: readonly T[], filter: ResourceFilter, counts: Record<string, number>): ConsolePage<T> {
    return {
      total: matched.length,
      offset: filter.offset,
      items: matched.slice(filter.offset, filter.offset + filter.limit),
      counts,
      ...(this.#truncated ? { truncated: true } : {}),
    };
  }

  /** Every session, with how many resources each holds; `remainingMs` from the caller (local ones). */
  sessions(remainingOf: (sessionId: string, coordinatorId: string) => number | null): ConsoleSessionRow[] {
    const leases = new Map<string, number>();
    for (const o of this.#owners.values()) {
      leases.set(o.record.sessionId, (leases.get(o.record.sessionId) ?? 0) + 1);
    }
    return [...this.#sessions.values()]
      .map((s) => ({
        sessionId: s.sessionId,
        workerId: s.record.workerId,
        coordinatorId: s.record.coordinatorId,
        ending: s.record.ending === true,
        leases: leases.get(s.sessionId) ?? 0,
        remainingMs: remainingOf(s.sessionId, s.record.coordinatorId),
      }))
      .sort((a, b) =>
        a.coordinatorId === b.coordinatorId
          ? a.workerId.localeCompare(b.workerId)
          : a.coordinatorId.localeCompare(b.coordinatorId),
      );
  }

  /**
   * The durable part of a resource's story, from its tasks' records: each attempt's grant (with its
   * token, and whose lease it took over) and its end. Sink decisions are merged in by the read model.
   */
  taskStory(
    resource: string,
    histories: ReadonlyMap<string, readonly AttemptRecord[]> = new Map(),
  ): ConsoleTimelineEntry[] {
    const entries: ConsoleTimelineEntry[] = [];
    const tasks = this.tasksOf(resource);
    const attempts: {
      startedAtMs: number;
      workerId: string;
      token: string | null;
      endedAtMs?: number;
      outcome?: string;
      taskId: string;
    }[] = [];
    for (const t of tasks) {
      const r = t.record;
      if (r.createdAtMs !== undefined) {
        entries.push(entry(r.createdAtMs, 'submitted', null, null, `task ${r.taskId} submitted`));
      }
      // The ended attempts: the history read on demand for this timeline, else (not read) the one
      // the record keeps, the attempt that ended last.
      const { taskId } = r;
      const history = histories.get(taskId);
      for (const a of history !== undefined && history.length > 0 ? history : r.last === undefined ? [] : [r.last]) {
        const { startedAtMs, workerId, token, endedAtMs, outcome } = a;
        attempts.push({ taskId, startedAtMs, workerId, token, endedAtMs, outcome });
      }
      if (r.open !== undefined) {
        const { startedAtMs, workerId } = r.open;
        attempts.push({ taskId, startedAtMs, workerId, token: t.modRevision.toString() });
      }
    }
    attempts.sort((a, b) => a.startedAtMs - b.startedAtMs);
    let previous: (typeof attempts)[number] | undefined;
    for (const a of attempts) {
      const takeover =
        previous !== undefined && previous.workerId !== a.workerId && previous.outcome === 'expired'
          ? ` — takeover from ${previous.workerId} (token ${previous.token ?? '?'}), whose lease expired`
          : '';
      entries.push(
        entry(
          a.startedAtMs,
          'granted',
          a.workerId,
          a.token,
          `${a.workerId} granted ${a.taskId}, token ${a.token ?? '?'}${takeover}`,
        ),
      );
      if (a.endedAtMs !== undefined && a.outcome !== undefined) {
        const problem = a.outcome === 'expired' || a.outcome === 'failed';
        entries.push({
          ...entry(
            a.endedAtMs,
            a.outcome,
            a.workerId,
            a.token,
            `${a.workerId}'s attempt (token ${a.token ?? '?'}) ${OUTCOME_TEXT[a.outcome] ?? a.outcome}`,
          ),
          problem,
        });
      }
      previous = a;
    }
    return entries;
  }

  /** Who was granted `token` on `resource` (from the task records), for the story's sentences. */
  holderOf(resource: string, token: string): string | undefined {
    for (const t of this.tasksOf(resource)) {
      if (t.record.open !== undefined && t.modRevision.toString() === token) return t.record.open.workerId;
      if (t.record.last?.token === token) return t.record.last.workerId;
    }
    return undefined;
  }
}

const OUTCOME_TEXT: Readonly<Record<string, string>> = {
  expired: 'EXPIRED: its lease ended without a result (the worker died, hung or was partitioned)',
  failed: 'FAILED: the handler threw',
  completed: 'completed',
  released: 'was released',
  abandoned: 'was abandoned (the fence could not be advanced)',
  cancelled: 'was cancelled',
};

function entry(
  atMs: number,
  kind: string,
  workerId: string | null,
  token: string | null,
  text: string,
): ConsoleTimelineEntry {
  return { atMs, kind, workerId, token, stale: false, problem: false, text };
}

function matchesResource(row: ConsoleResourceRow, q: string): boolean {
  return (
    row.resource.toLowerCase().includes(q) ||
    (row.taskId?.toLowerCase().includes(q) ?? false) ||
    (row.owner?.workerId.toLowerCase().includes(q) ?? false)
  );
}
