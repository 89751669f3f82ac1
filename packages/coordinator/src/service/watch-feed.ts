/**
 * Feeds the {@link TaskIndex} and the coordinator's reactions from the store's watch.
 *
 * Start: a snapshot of tasks + owners at one revision X, reset the index, watch from X + 1. The
 * watch covers only the families the index and the reactions use — owners, sessions, tasks — and
 * carries no previous values: whose owner key a delete removed comes from the index itself, which
 * holds every owner key up to the revision it has applied.
 *
 * The store resumes a dropped stream by itself; if the watch is cancelled (compaction: the revision
 * it needs is gone) or errors, the feed rebuilds: a fresh snapshot, then a new watch from that
 * revision + 1. Nothing here throws into the void: failures are logged, `ready` goes false, and a
 * rebuild is scheduled with backoff.
 */
import { RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import { entryOf, type OwnerEntry, type TaskEntry, type TaskIndex } from '../core/task-index.js';
import type { CoordinatorPeers } from '../core/peers.js';
import type { Timers } from '../core/timers.js';
import type { LeaseStore, StoreEvent, StoredOwner, StoredSession, StoredTask } from '../store/port.js';

export type FeedEvent =
  | { readonly kind: 'task'; readonly taskId: string; readonly task: StoredTask | undefined }
  | {
      readonly kind: 'owner';
      readonly resource: string;
      readonly owner: StoredOwner | undefined;
      /** The owner key this event replaced or deleted, as the index knew it (undefined if none). */
      readonly previous: OwnerEntry | undefined;
    }
  | { readonly kind: 'session'; readonly sessionId: string; readonly session: StoredSession | undefined };

/** All events of one etcd revision (one transaction or one lease expiry). */
export interface RevisionGroup {
  readonly revision: bigint;
  readonly events: readonly FeedEvent[];
}

/** Another reader of the one watch (the console's read model): see {@link WatchFeed.listen}. */
export interface FeedListener {
  /** A revision's events, after the index applied them. */
  onGroup(group: RevisionGroup): void;
  /** The index was rebuilt from a fresh snapshot: revisions in between were not delivered as groups. */
  onRebuilt(): void;
}

export interface WatchFeedOptions {
  readonly store: Pick<LeaseStore, 'snapshot' | 'watch' | 'sessions'>;
  readonly timers: Timers;
  readonly index: TaskIndex;
  /** Which coordinators serve sessions: reset from the sessions at the snapshot's revision, then kept by the watch. */
  readonly peers?: Pick<CoordinatorPeers, 'reset' | 'apply'>;
  readonly log: Logger;
  readonly onGroup: (group: RevisionGroup) => void;
  /** After a watch response (or a rebuild) was applied to the index. */
  readonly onApplied?: () => void;
  /** After the index was (re)built from a snapshot. */
  readonly onBuilt?: () => void;
  /** Records of layout v1 seen (in the snapshot or the watch): to convert. */
  readonly onLegacy?: (tasks: readonly StoredTask[]) => void;
  /** A task key written or deleted (after the index applied it): `modRevision` of the event. */
  readonly onTaskWritten?: (taskId: string, modRevision: bigint) => void;
}

export class WatchFeed {
  readonly #o: WatchFeedOptions;
  #watcher: { cancel(): Promise<void> } | undefined;
  #ready = false;
  #closed = false;
  #rebuilding: Promise<void> | undefined;
  #failures = 0;
  readonly #repeats = new RepeatGate();
  readonly #listeners = new Set<FeedListener>();

  constructor(options: WatchFeedOptions) {
    this.#o = options;
  }

  get ready(): boolean {
    return this.#ready;
  }

  /**
   * Hear every revision group the feed applies from now on, and every rebuild: one watch feeds
   * the index, the reactions and any other reader. Returns the unsubscribe.
   */
  listen(listener: FeedListener): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** First build; rejects if etcd cannot be read at all (start-up fails loudly). */
  async start(): Promise<void> {
    await this.#build();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#ready = false;
    await this.#cancelWatcher();
  }

  async #build(): Promise<void> {
    await this.#cancelWatcher();
    // Page by page into lean entries: the snapshot never holds the stored records all at once.
    const entries: TaskEntry[] = [];
    const defaults = this.#o.index.defaults;
    let legacy = 0;
    const snap = await this.#o.store.snapshot((tasks) => {
      const old: StoredTask[] = [];
      for (const t of tasks) {
        entries.push(entryOf(t, defaults));
        if (t.legacy !== undefined) old.push(t);
      }
      legacy += old.length;
      if (old.length > 0) this.#o.onLegacy?.(old);
    });
    const owners = snap.owners.map(ownerEntry);
    const peers = this.#o.peers;
    if (peers !== undefined) {
      const sessions = await this.#o.store.sessions(snap.revision);
      peers.reset(sessions.map((x) => [x.sessionId, x.record.coordinatorId] as const));
    }
    this.#o.index.reset(entries, owners, snap.revision);
    const pending = this.#o.index.stats().pending;
    let failed = false;
    const watcher = await this.#o.store.watch(snap.revision + 1n, {
      onRevision: (revision, events) => {
        if (failed) return;
        try {
          this.#onRevision(revision, events);
        } catch (err) {
          failed = true;
          this.#o.log.error({ err }, 'watch event handling failed, rebuilding index');
          this.#scheduleRebuild();
        }
      },
      onProgress: (revision) => {
        if (failed) return;
        this.#o.index.advanceTo(revision);
        this.#o.onApplied?.();
      },
      onError: (err) => {
        failed = true;
        this.#o.log.warn({ err }, 'watch cancelled, rebuilding index');
        this.#scheduleRebuild();
      },
      onDisconnected: (err) => {
        const gate = this.#repeats.note('disconnected', performance.now());
        if (gate.log) this.#o.log.warn({ err, repeated: gate.suppressed }, 'watch disconnected, resuming');
      },
    });
    if (this.#closed) {
      await watcher.cancel();
      return;
    }
    this.#watcher = watcher;
    this.#ready = true;
    this.#failures = 0;
    this.#o.log.info(
      { revision: snap.revision.toString(), tasks: entries.length, pending, owners: owners.length, layoutV1: legacy },
      'index built',
    );
    this.#o.onBuilt?.();
    this.#o.onApplied?.();
    for (const listener of [...this.#listeners])
      this.#hear(() => {
        listener.onRebuilt();
      });
  }

  #hear(call: () => void): void {
    try {
      call();
    } catch (err) {
      this.#o.log.error({ err }, 'watch listener failed');
    }
  }

  #scheduleRebuild(): void {
    this.#ready = false;
    if (this.#closed || this.#rebuilding !== undefined) return;
    const delayMs = Math.min(2_000, 50 * 2 ** Math.min(this.#failures, 6));
    this.#rebuilding = new Promise<void>((resolve) => {
      this.#o.timers.setTimeout(resolve, delayMs);
    })
      .then(() => (this.#closed ? undefined : this.#build()))
      .catch((err: unknown) => {
        this.#failures += 1;
        const gate = this.#repeats.note('rebuild', performance.now());
        if (gate.log) this.#o.log.warn({ err, repeated: gate.suppressed }, 'index rebuild failed, will retry');
      })
      .finally(() => {
        this.#rebuilding = undefined;
        if (!this.#ready && !this.#closed) this.#scheduleRebuild();
      });
  }

  async #cancelWatcher(): Promise<void> {
    const watcher = this.#watcher;
    this.#watcher = undefined;
    if (watcher === undefined) return;
    await watcher.cancel().catch(() => undefined);
  }

  /**
   * One revision's events, parsed against the index as it was before that revision (so `previous`
   * is the owner key the event replaced), then applied, then handed to the reactions.
   */
  #onRevision(revision: bigint, events: readonly StoreEvent[]): void {
    const group: RevisionGroup = {
      revision,
      events: events.map((ev): FeedEvent =>
        ev.kind === 'owner' ? { ...ev, previous: this.#o.index.previousOwner(ev.resource) } : ev,
      ),
    };
    this.#apply(group);
    try {
      this.#o.onGroup(group);
    } catch (err) {
      this.#o.log.error({ err }, 'watch handler failed');
    }
    for (const listener of [...this.#listeners])
      this.#hear(() => {
        listener.onGroup(group);
      });
  }

  #apply(group: RevisionGroup): void {
    const index = this.#o.index;
    let legacy: StoredTask[] | undefined;
    for (const ev of group.events) {
      if (ev.kind === 'task') {
        const t = ev.task;
        index.applyTask(ev.taskId, t === undefined ? undefined : entryOf(t, index.defaults));
        if (t?.legacy !== undefined) (legacy ??= []).push(t);
        else this.#o.onTaskWritten?.(ev.taskId, group.revision);
      } else if (ev.kind === 'owner') {
        const o = ev.owner;
        index.applyOwner(ev.resource, o === undefined ? undefined : ownerEntry(o));
      } else {
        this.#o.peers?.apply(ev.sessionId, ev.session?.record.coordinatorId);
      }
    }
    index.advanceTo(group.revision);
    if (legacy !== undefined) this.#o.onLegacy?.(legacy);
  }
}

function ownerEntry(o: StoredOwner): OwnerEntry {
  const { taskId, sessionId, requestId } = o.record;
  return { resource: o.resource, taskId, sessionId, requestId, token: o.token };
}
