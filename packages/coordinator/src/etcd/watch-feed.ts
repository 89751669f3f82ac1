/**
 * Feeds the {@link TaskIndex} and the coordinator's reactions from one watch under the key prefix.
 *
 * Start: range-read tasks + owners at one revision X, reset the index, watch from X + 1. The watch
 * covers only the families the index and the reactions use — `owners/`, `sessions/`, `tasks/`
 * (adjacent in key order, see keys.ts) — and asks for no previous values: whose owner key a delete
 * removed comes from the index itself, which holds every owner key up to the revision it has
 * applied (etcd would otherwise read the previous value of every event from its backend).
 *
 * etcd3 resumes a dropped stream from the last revision it delivered by itself; if the watch is
 * cancelled (compaction: the revision it needs is gone) or errors, the feed rebuilds: a fresh
 * range read, then a new watch from that revision + 1. Nothing here throws into the void: failures are logged, `ready` goes false, and a
 * rebuild is scheduled with backoff.
 */
import type { Etcd3, IKeyValue, IWatchResponse, Watcher } from 'etcd3';
import type { Logger } from 'pino';
import type { OwnerEntry, TaskIndex } from '../core/task-index.js';
import { isCompacted } from './errors.js';
import type { KeyLayout } from './keys.js';
import {
  parseOwner,
  parseSession,
  parseTask,
  type EtcdReads,
  type StoredOwner,
  type StoredSession,
  type StoredTask,
} from './reads.js';

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

export interface WatchFeedOptions {
  readonly client: Etcd3;
  readonly reads: EtcdReads;
  readonly keys: KeyLayout;
  readonly index: TaskIndex;
  readonly log: Logger;
  readonly onGroup: (group: RevisionGroup) => void;
  /** After a watch response (or a rebuild) was applied to the index. */
  readonly onApplied?: () => void;
}

export class WatchFeed {
  readonly #o: WatchFeedOptions;
  #watcher: Watcher | undefined;
  #ready = false;
  #closed = false;
  #rebuilding: Promise<void> | undefined;
  #failures = 0;

  constructor(options: WatchFeedOptions) {
    this.#o = options;
  }

  get ready(): boolean {
    return this.#ready;
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
    const snap = await this.#o.reads.snapshot();
    const pending = snap.tasks
      .filter((t) => t.record.state === 'pending')
      .map((t) => ({
        taskId: t.record.taskId,
        resource: t.record.resource,
        createRevision: t.createRevision,
        modRevision: t.modRevision,
        record: t.record,
      }));
    const owners = snap.owners.map(ownerEntry);
    this.#o.index.reset(pending, owners, snap.revision);
    const watcher = await this.#o.client
      .watch()
      .inRange(this.#o.keys.watched)
      .startRevision((snap.revision + 1n).toString())
      .create();
    if (this.#closed) {
      await watcher.cancel();
      return;
    }
    this.#watcher = watcher;
    watcher.on('data', (res: IWatchResponse) => {
      try {
        this.#onData(res);
      } catch (err) {
        // etcd3 rethrows listener errors out of band; never let one escape: rebuild instead.
        this.#o.log.error({ err }, 'watch event handling failed, rebuilding index');
        this.#scheduleRebuild();
      }
    });
    watcher.on('error', (err: unknown) => {
      this.#o.log.warn({ err, compacted: isCompacted(err) }, 'watch cancelled, rebuilding index');
      this.#scheduleRebuild();
    });
    watcher.on('disconnected', (err: unknown) => {
      this.#o.log.warn({ err }, 'watch disconnected, resuming');
    });
    this.#ready = true;
    this.#failures = 0;
    this.#o.log.info(
      { revision: snap.revision.toString(), pending: pending.length, owners: owners.length },
      'index built',
    );
    this.#o.onApplied?.();
  }

  #scheduleRebuild(): void {
    this.#ready = false;
    if (this.#closed || this.#rebuilding !== undefined) return;
    const delayMs = Math.min(2_000, 50 * 2 ** Math.min(this.#failures, 6));
    this.#rebuilding = new Promise<void>((resolve) => setTimeout(resolve, delayMs))
      .then(() => (this.#closed ? undefined : this.#build()))
      .catch((err: unknown) => {
        this.#failures += 1;
        this.#o.log.warn({ err }, 'index rebuild failed, will retry');
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
    watcher.removeAllListeners();
    watcher.on('error', () => undefined);
    await watcher.cancel().catch(() => undefined);
  }

  #onData(res: IWatchResponse): void {
    // Events arrive in revision order; each revision's events are parsed against the index as it
    // was before that revision (so `previous` is the owner key the event replaced), then applied.
    let events: FeedEvent[] = [];
    let revision: string | undefined;
    const flush = (): void => {
      if (revision === undefined || events.length === 0) return;
      const group: RevisionGroup = { revision: BigInt(revision), events };
      this.#apply(group);
      try {
        this.#o.onGroup(group);
      } catch (err) {
        this.#o.log.error({ err }, 'watch handler failed');
      }
    };
    for (const ev of res.events) {
      if (ev.kv.mod_revision !== revision) {
        flush();
        events = [];
        revision = ev.kv.mod_revision;
      }
      const event = this.#parse(ev.type === 'Delete', ev.kv);
      if (event !== undefined) events.push(event);
    }
    flush();
    this.#o.index.advanceTo(BigInt(res.header.revision));
    this.#o.onApplied?.();
  }

  #parse(deleted: boolean, kv: IKeyValue): FeedEvent | undefined {
    const parsed = this.#o.keys.parse(kv.key.toString());
    switch (parsed?.family) {
      case 'task':
        return { kind: 'task', taskId: parsed.taskId, task: deleted ? undefined : parseTask(kv) };
      case 'owner':
        return {
          kind: 'owner',
          resource: parsed.resource,
          owner: deleted ? undefined : parseOwner(this.#o.keys, kv),
          previous: this.#o.index.previousOwner(parsed.resource),
        };
      case 'session':
        return {
          kind: 'session',
          sessionId: parsed.sessionId,
          session: deleted ? undefined : parseSession(kv),
        };
      case 'holding':
      case undefined:
        return undefined;
    }
  }

  #apply(group: RevisionGroup): void {
    const index = this.#o.index;
    for (const ev of group.events) {
      if (ev.kind === 'task') {
        const t = ev.task;
        index.applyTask(
          ev.taskId,
          t?.record.state === 'pending'
            ? {
                taskId: t.record.taskId,
                resource: t.record.resource,
                createRevision: t.createRevision,
                modRevision: t.modRevision,
                record: t.record,
              }
            : undefined,
        );
      } else if (ev.kind === 'owner') {
        const o = ev.owner;
        index.applyOwner(ev.resource, o === undefined ? undefined : ownerEntry(o));
      }
    }
    index.advanceTo(group.revision);
  }
}

function ownerEntry(o: StoredOwner): OwnerEntry {
  const { taskId, sessionId, requestId } = o.record;
  return { resource: o.resource, taskId, sessionId, requestId, token: o.token };
}
