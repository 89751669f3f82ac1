/**
 * The web console's read model, one per coordinator, built on the first console request:
 *
 * - a {@link ConsoleView} (tasks, owners, sessions) from one store snapshot, kept current by the
 *   coordinator's ONE watch — the watch feed's revision groups, the same the task index applies;
 *   when the feed rebuilds (its watch was lost) the view reads a new snapshot;
 * - the sink's side through the {@link SinkObserver} port: its event stream (fences, writes,
 *   refusals) and fences on demand;
 * - the subscribers' push channel: every change goes to each open console stream as it happens,
 *   and a `leases` tick each second carries the time left of the sessions this coordinator serves.
 *
 * Two models, one watch, on purpose: the task index keeps lean entries for up to millions of
 * tasks and drives grants; the console keeps full records of at most CONSOLE_MAX_TASKS tasks,
 * sessions and sink fences for display, and only once someone opens the console. The transport
 * (`http/console/routes-console.ts`) only serves what this holds.
 */
import type { SinkEvent } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type {
  ConsoleFeedItem,
  ConsoleHello,
  ConsoleLeases,
  ConsolePage,
  ConsoleResourceRow,
  ConsoleSessionRow,
  ConsoleTaskRow,
  ConsoleTimeline,
} from '../../../ui/console-api.js';
import type { CoordinatorConfig } from '../../config.js';
import type { SinkObserver } from '../../fence/port.js';
import type { AttemptRecord } from '../../core/task-record.js';
import type { LeaseStore } from '../../store/port.js';
import { taskEventOf } from '../events.js';
import type { FeedEvent, FeedListener, RevisionGroup } from '../watch-feed.js';
import { ConsoleView, type ResourceFilter } from './console-view.js';
import { feedOfSink, feedOfTask } from './feed-text.js';

export { CONSOLE_MAX_TASKS, type ResourceFilter } from './console-view.js';

/** What the console's read model uses. */
export interface ConsoleReadModelContext {
  readonly coordinatorId: string;
  readonly config: Pick<CoordinatorConfig, 'retryPolicy'>;
  readonly store: Pick<LeaseStore, 'snapshot' | 'sessions' | 'taskDetail'>;
  /** The one watch (the watch feed): its groups after the index applied them, and its rebuilds. */
  readonly feed: { listen(listener: FeedListener): () => void };
  /** The sink's events and fences; undefined: none shown. */
  readonly sink: SinkObserver | undefined;
  /** Time left of a session this coordinator serves; undefined for others'. */
  readonly remainingMs: (sessionId: string) => number | undefined;
  readonly wallClock: () => number;
  readonly log: Logger;
}

/** One open console stream. */
export interface ConsoleSubscriber {
  send(event: string, data: unknown): void;
  /** The read model is closing (shutdown): end the stream. */
  end(): void;
}

const RECENT_ITEMS = 200;
/** Sink items kept for the per-resource timelines (the durable task part comes from etcd). */
const STORY_ITEMS = 20_000;
const TICK_MS = 1_000;
/** Tasks of one resource whose histories a timeline reads on demand (the newest). */
const TIMELINE_TASKS = 20;

export class ConsoleReadModel {
  readonly #ctx: ConsoleReadModelContext;
  readonly #view: ConsoleView;
  readonly #clients = new Set<ConsoleSubscriber>();
  readonly #recent: ConsoleFeedItem[] = [];
  readonly #story: ConsoleFeedItem[] = [];
  readonly #abort = new AbortController();
  #starting: Promise<void> | undefined;
  #unlisten: (() => void) | undefined;
  /** Groups heard while a snapshot is read: applied after it, those past its revision. */
  #buffer: RevisionGroup[] | undefined;
  #revision = 0n;
  #tick: NodeJS.Timeout | undefined;
  #nextId = 1;
  #sinkConnected = false;
  #closed = false;

  constructor(ctx: ConsoleReadModelContext) {
    this.#ctx = ctx;
    this.#view = new ConsoleView(ctx.config.retryPolicy);
  }

  get coordinatorId(): string {
    return this.#ctx.coordinatorId;
  }

  /** Build the view and start hearing the watch and the sink (once; later calls wait for it). */
  ready(): Promise<void> {
    this.#starting ??= this.#start().catch((err: unknown) => {
      this.#starting = undefined; // the next request tries again
      this.#unlisten?.();
      this.#unlisten = undefined;
      throw err;
    });
    return this.#starting;
  }

  async #start(): Promise<void> {
    // Listen first, then read: nothing committed after the snapshot is missed.
    this.#unlisten = this.#ctx.feed.listen({
      onGroup: (group) => {
        if (this.#buffer !== undefined) this.#buffer.push(group);
        else if (group.revision > this.#revision) this.#applyGroup(group);
      },
      onRebuilt: () => {
        if (this.#closed || this.#buffer !== undefined) return;
        this.#ctx.log.warn('console: the watch was rebuilt; reading a new snapshot');
        this.#load().then(
          () => {
            this.#broadcast('refresh', {});
          },
          (err: unknown) => {
            this.#ctx.log.warn({ err }, 'console snapshot failed; the console shows old data until a reload');
          },
        );
      },
    });
    await this.#load();
    if (this.#ctx.sink !== undefined) this.#relaySink(this.#ctx.sink);
  }

  async #load(): Promise<void> {
    const { store, log } = this.#ctx;
    this.#buffer = [];
    try {
      // Tasks page by page (byte-bounded reads) straight into the view, which keeps slim copies.
      this.#view.beginReset();
      const snapshot = await store.snapshot((tasks) => {
        for (const t of tasks) this.#view.applyTask(t.record.taskId, t);
      });
      const sessions = await store.sessions(snapshot.revision);
      this.#view.endReset(snapshot.owners, sessions);
      this.#revision = snapshot.revision;
    } finally {
      const buffered = this.#buffer;
      this.#buffer = undefined;
      for (const group of buffered) if (group.revision > this.#revision) this.#applyGroup(group);
    }
    if (this.#view.truncated) {
      log.warn(
        { kept: this.#view.taskCount },
        'the console keeps at most CONSOLE_MAX_TASKS tasks; later ones are not shown',
      );
    }
  }

  #applyGroup(group: RevisionGroup): void {
    this.#revision = group.revision;
    for (const ev of group.events) this.#apply(ev);
  }

  #apply(ev: FeedEvent): void {
    switch (ev.kind) {
      case 'task': {
        this.#view.applyTask(ev.taskId, ev.task);
        if (ev.task === undefined) break;
        const now = this.#ctx.wallClock();
        const event = taskEventOf(ev.task, this.#ctx, now);
        const last = ev.task.record.last;
        const lost =
          event.event === 'granted' && last?.outcome === 'expired' && last.workerId !== event.workerId
            ? { workerId: last.workerId, token: last.token }
            : undefined;
        this.#publish(feedOfTask(event, this.#nextId++, lost));
        this.#broadcast('task', this.#view.taskRow(ev.task, now));
        this.#sendResource(ev.task.record.resource);
        break;
      }
      case 'owner':
        this.#view.applyOwner(ev.resource, ev.owner);
        this.#sendResource(ev.resource);
        break;
      case 'session':
        this.#view.applySession(ev.sessionId, ev.session);
        this.#broadcast('sessions', this.sessions());
        break;
    }
  }

  #relaySink(sink: SinkObserver): void {
    const { log } = this.#ctx;
    const stream = sink.events({
      signal: this.#abort.signal,
      onConnected: () => {
        this.#sinkConnected = true;
        this.#broadcast('sink', { connected: true });
      },
      onDisconnected: ({ error, retryInMs }) => {
        this.#sinkConnected = false;
        log.debug({ err: error, retryInMs }, 'console sink relay disconnected');
        this.#broadcast('sink', { connected: false });
      },
    });
    void (async () => {
      try {
        for await (const event of stream) this.#onSink(event);
      } catch (err) {
        if (!this.#closed) log.warn({ err }, 'console sink relay stopped');
      }
    })();
  }

  #onSink(event: SinkEvent): void {
    this.#view.applySink(event);
    const item = feedOfSink(event, this.#nextId++, (resource, token) => this.#view.holderOf(resource, token));
    if (item === undefined) return;
    this.#publish(item);
    if (item.resource !== null) this.#sendResource(item.resource);
  }

  #publish(item: ConsoleFeedItem): void {
    this.#recent.push(item);
    if (this.#recent.length > RECENT_ITEMS) this.#recent.shift();
    if (item.source === 'sink') {
      this.#story.push(item);
      if (this.#story.length > STORY_ITEMS) this.#story.splice(0, this.#story.length - STORY_ITEMS);
    }
    this.#broadcast('feed', item);
  }

  #sendResource(resource: string): void {
    if (this.#clients.size === 0) return;
    const row = this.#view.resourceRow(resource, this.#ctx.wallClock());
    if (row !== undefined) this.#broadcast('resource', row);
  }

  #broadcast(event: string, data: unknown): void {
    for (const client of this.#clients) client.send(event, data);
  }

  /** The resources view: filtered and paged here; fences not seen yet are read from the sink first. */
  async resources(filter: ResourceFilter, nowMs: number): Promise<ConsolePage<ConsoleResourceRow>> {
    const page = this.#view.resources(filter, nowMs);
    if (!page.items.some((r) => r.fence === null)) return page;
    await this.#fillFences(page.items.map((r) => r.resource));
    return this.#view.resources(filter, nowMs);
  }

  tasks(filter: ResourceFilter, nowMs: number): ConsolePage<ConsoleTaskRow> {
    return this.#view.tasks(filter, nowMs);
  }

  sessions(): ConsoleSessionRow[] {
    return this.#view.sessions((sessionId) => {
      const left = this.#ctx.remainingMs(sessionId);
      return left === undefined ? null : Math.max(0, Math.floor(left));
    });
  }

  /** Learn the sink's fence of resources not seen in its stream yet (the rows a page shows). */
  async #fillFences(resources: readonly string[]): Promise<void> {
    const sink = this.#ctx.sink;
    if (sink === undefined) return;
    const missing = resources.filter((r) => !this.#view.hasFence(r)).slice(0, 100);
    await Promise.all(
      missing.map(async (resource) => {
        try {
          this.#view.setFence(resource, await sink.fenceOf(resource));
        } catch {
          // Unknown for now: the row shows no fence.
        }
      }),
    );
  }

  /**
   * The ended attempts of the resource's newest tasks (at most {@link TIMELINE_TASKS}, each at most
   * its kept history), read on demand: records carry only their last ended attempt, and a
   * takeover's story needs the attempt it took over from. A task that cannot be read keeps its
   * record's last attempt.
   */
  async #histories(resource: string): Promise<Map<string, readonly AttemptRecord[]>> {
    const tasks = this.#view
      .tasksOf(resource)
      .sort((a, b) => (b.record.createdAtMs ?? 0) - (a.record.createdAtMs ?? 0))
      .slice(0, TIMELINE_TASKS);
    const out = new Map<string, readonly AttemptRecord[]>();
    await Promise.all(
      tasks.map(async (t) => {
        try {
          const detail = await this.#ctx.store.taskDetail(t.record.taskId);
          if (detail !== undefined) out.set(t.record.taskId, detail.history);
        } catch {
          // Shown from the record alone.
        }
      }),
    );
    return out;
  }

  /** The resource's story: its tasks' grants and ends, merged with the sink's decisions. */
  async timeline(resource: string): Promise<ConsoleTimeline> {
    const [, histories] = await Promise.all([this.#fillFences([resource]), this.#histories(resource)]);
    const sinkPart = this.#story
      .filter((i) => i.resource === resource)
      .map((i) => ({
        atMs: i.atMs,
        kind: i.kind,
        workerId: i.workerId,
        token: i.token,
        stale: i.stale,
        problem: i.problem,
        text: i.text,
      }));
    const entries = [...this.#view.taskStory(resource, histories), ...sinkPart].sort((a, b) => a.atMs - b.atMs);
    return { resource, row: this.#view.resourceRow(resource, this.#ctx.wallClock()) ?? null, entries };
  }

  /** A new console stream: `hello` now, then every change, and the `leases` tick. */
  subscribe(client: ConsoleSubscriber): () => void {
    const hello: ConsoleHello = {
      coordinatorId: this.#ctx.coordinatorId,
      sinkConnected: this.#sinkConnected || this.#ctx.sink === undefined,
      recent: [...this.#recent],
    };
    client.send('hello', hello);
    client.send('sessions', this.sessions());
    this.#clients.add(client);
    this.#tick ??= setInterval(() => {
      this.#broadcast('leases', this.leases());
    }, TICK_MS);
    this.#tick.unref();
    return () => {
      this.#clients.delete(client);
      if (this.#clients.size === 0 && this.#tick !== undefined) {
        clearInterval(this.#tick);
        this.#tick = undefined;
      }
    };
  }

  leases(): ConsoleLeases {
    const remainingMs: Record<string, number> = {};
    for (const s of this.sessions()) if (s.remainingMs !== null) remainingMs[s.sessionId] = s.remainingMs;
    return { coordinatorId: this.#ctx.coordinatorId, remainingMs };
  }

  get clients(): number {
    return this.#clients.size;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    this.#unlisten?.();
    if (this.#tick !== undefined) clearInterval(this.#tick);
    for (const client of [...this.#clients]) client.end();
    this.#clients.clear();
    await this.#ctx.sink?.close();
  }
}
