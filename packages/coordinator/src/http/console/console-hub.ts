/**
 * The web console's live side, one per coordinator, started by the first console request:
 *
 * - a {@link ConsoleModel} built from one store snapshot (tasks, owners, sessions at one revision)
 *   and kept current by a store watch from the next revision (on a watch error: snapshot again);
 * - a relay of the sink's event stream (`GET /v1/events` at the sink, with this coordinator's sink
 *   key, through `@leasehold/client`'s reconnecting reader): fences, writes, refusals;
 * - the browsers' push channel: every change goes to each open console stream as it happens, and a
 *   `leases` tick each second carries the time left of the sessions this coordinator serves.
 *
 * The browser talks to the coordinator only: it never needs the sink's address or key.
 */
import { sinkEvents } from '@leasehold/client';
import type { RetryPolicy, SinkEvent, TaskEvent } from '@leasehold/protocol';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import type { Logger } from 'pino';
import type { AttemptRecord } from '../../core/task-record.js';
import type { StoreEvent, LeaseStore } from '../../store/port.js';
import { ConsoleModel } from './console-model.js';
import type { ConsoleFeedItem, ConsoleHello, ConsoleLeases, ConsoleTimeline } from './console-types.js';
import { feedOfSink, feedOfTask } from './feed-text.js';

export interface ConsoleHubDeps {
  readonly coordinatorId: string;
  readonly store: LeaseStore;
  readonly retryDefaults: RetryPolicy;
  /** Task event of a stored task write (the same as `GET /v1/events` sends). */
  readonly taskEventOf: (stored: NonNullable<Extract<StoreEvent, { kind: 'task' }>['task']>) => TaskEvent;
  /** Time left of a session this coordinator serves; undefined for others'. */
  readonly remainingMs: (sessionId: string) => number | undefined;
  readonly sink: { readonly url: string; readonly key: string; readonly tls?: TlsClientOptions } | undefined;
  readonly wallClock: () => number;
  readonly log: Logger;
}

/** One open console stream. */
export interface ConsoleClient {
  send(event: string, data: unknown): void;
  /** The hub is closing (shutdown): end the stream. */
  end(): void;
}

const RECENT_ITEMS = 200;
/** Sink items kept for the per-resource timelines (the durable task part comes from etcd). */
const STORY_ITEMS = 20_000;
const TICK_MS = 1_000;
/** Tasks of one resource whose histories a timeline reads on demand (the newest). */
const TIMELINE_TASKS = 20;

export class ConsoleHub {
  readonly model: ConsoleModel;
  readonly #deps: ConsoleHubDeps;
  readonly #clients = new Set<ConsoleClient>();
  readonly #recent: ConsoleFeedItem[] = [];
  readonly #story: ConsoleFeedItem[] = [];
  readonly #abort = new AbortController();
  #sinkClient: SinkClient | undefined;
  #starting: Promise<void> | undefined;
  #watch: { cancel(): Promise<void> } | undefined;
  #tick: NodeJS.Timeout | undefined;
  #nextId = 1;
  #sinkConnected = false;
  #closed = false;

  constructor(deps: ConsoleHubDeps) {
    this.#deps = deps;
    this.model = new ConsoleModel(deps.retryDefaults);
  }

  get coordinatorId(): string {
    return this.#deps.coordinatorId;
  }

  /** Build the model and start the watch and the sink relay (once; later calls wait for it). */
  ready(): Promise<void> {
    this.#starting ??= this.#start().catch((err: unknown) => {
      this.#starting = undefined; // the next request tries again
      throw err;
    });
    return this.#starting;
  }

  async #start(): Promise<void> {
    await this.#load();
    if (this.#deps.sink !== undefined) this.#relaySink(this.#deps.sink);
  }

  async #load(): Promise<void> {
    const { store, log } = this.#deps;
    // Tasks page by page (byte-bounded reads) straight into the model, which keeps slim copies.
    this.model.beginReset();
    const snapshot = await store.snapshot((tasks) => {
      for (const t of tasks) this.model.applyTask(t.record.taskId, t);
    });
    const sessions = await store.sessions(snapshot.revision);
    this.model.endReset(snapshot.owners, sessions);
    if (this.model.truncated) {
      log.warn(
        { kept: this.model.taskCount },
        'the console keeps at most CONSOLE_MAX_TASKS tasks; later ones are not shown',
      );
    }
    this.#watch = await store.watch(snapshot.revision + 1n, {
      onRevision: (_revision, events) => {
        this.#apply(events);
      },
      onProgress: () => undefined,
      onError: (err) => {
        if (this.#closed) return;
        log.warn({ err }, 'console watch ended; reading a new snapshot');
        setTimeout(() => {
          if (this.#closed) return;
          this.#load().then(
            () => {
              this.#broadcast('refresh', {});
            },
            (e: unknown) => {
              log.warn({ err: e }, 'console snapshot failed; the console shows old data until a reload');
            },
          );
        }, 500).unref();
      },
    });
  }

  #apply(events: readonly StoreEvent[]): void {
    for (const ev of events) {
      switch (ev.kind) {
        case 'task': {
          this.model.applyTask(ev.taskId, ev.task);
          if (ev.task === undefined) break;
          const now = this.#deps.wallClock();
          const event = this.#deps.taskEventOf(ev.task);
          const last = ev.task.record.last;
          const lost =
            event.event === 'granted' && last?.outcome === 'expired' && last.workerId !== event.workerId
              ? { workerId: last.workerId, token: last.token }
              : undefined;
          this.#publish(feedOfTask(event, this.#nextId++, lost));
          this.#broadcast('task', this.model.taskRow(ev.task, now));
          this.#sendResource(ev.task.record.resource);
          break;
        }
        case 'owner':
          this.model.applyOwner(ev.resource, ev.owner);
          this.#sendResource(ev.resource);
          break;
        case 'session':
          this.model.applySession(ev.sessionId, ev.session);
          this.#broadcast('sessions', this.sessions());
          break;
      }
    }
  }

  #relaySink(sink: NonNullable<ConsoleHubDeps['sink']>): void {
    const { log } = this.#deps;
    this.#sinkClient = new SinkClient({
      url: sink.url,
      key: sink.key,
      ...(sink.tls === undefined ? {} : { tls: sink.tls }),
    });
    const stream = sinkEvents({
      url: sink.url,
      key: sink.key,
      ...(sink.tls === undefined ? {} : { tls: sink.tls }),
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
      settings: { reconnect: { initialMs: 200, maxMs: 5_000 } },
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
    this.model.applySink(event);
    const item = feedOfSink(event, this.#nextId++, (resource, token) => this.model.holderOf(resource, token));
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
    const row = this.model.resourceRow(resource, this.#deps.wallClock());
    if (row !== undefined) this.#broadcast('resource', row);
  }

  #broadcast(event: string, data: unknown): void {
    for (const client of this.#clients) client.send(event, data);
  }

  sessions(): ReturnType<ConsoleModel['sessions']> {
    return this.model.sessions((sessionId) => {
      const left = this.#deps.remainingMs(sessionId);
      return left === undefined ? null : Math.max(0, Math.floor(left));
    });
  }

  /** Learn the sink's fence of resources not seen in its stream yet (the rows a page shows). */
  async fillFences(resources: readonly string[]): Promise<void> {
    const client = this.#sinkClient;
    if (client === undefined) return;
    const missing = resources.filter((r) => !this.model.hasFence(r)).slice(0, 100);
    await Promise.all(
      missing.map(async (resource) => {
        try {
          this.model.setFence(resource, await client.getFence(resource));
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
  async histories(resource: string): Promise<Map<string, readonly AttemptRecord[]>> {
    const tasks = this.model
      .tasksOf(resource)
      .sort((a, b) => (b.record.createdAtMs ?? 0) - (a.record.createdAtMs ?? 0))
      .slice(0, TIMELINE_TASKS);
    const out = new Map<string, readonly AttemptRecord[]>();
    await Promise.all(
      tasks.map(async (t) => {
        try {
          const detail = await this.#deps.store.taskDetail(t.record.taskId);
          if (detail !== undefined) out.set(t.record.taskId, detail.history);
        } catch {
          // Shown from the record alone.
        }
      }),
    );
    return out;
  }

  timeline(resource: string, histories?: ReadonlyMap<string, readonly AttemptRecord[]>): ConsoleTimeline {
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
    const entries = [...this.model.taskStory(resource, histories), ...sinkPart].sort((a, b) => a.atMs - b.atMs);
    return { resource, row: this.model.resourceRow(resource, this.#deps.wallClock()) ?? null, entries };
  }

  /** A new console stream: `hello` now, then every change, and the `leases` tick. */
  subscribe(client: ConsoleClient): () => void {
    const hello: ConsoleHello = {
      coordinatorId: this.#deps.coordinatorId,
      sinkConnected: this.#sinkConnected || this.#deps.sink === undefined,
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
    return { coordinatorId: this.#deps.coordinatorId, remainingMs };
  }

  get clients(): number {
    return this.#clients.size;
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#abort.abort();
    if (this.#tick !== undefined) clearInterval(this.#tick);
    for (const client of [...this.#clients]) client.end();
    this.#clients.clear();
    await this.#watch?.cancel().catch(() => undefined);
    await this.#sinkClient?.close();
  }
}
