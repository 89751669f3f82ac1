/**
 * The decision log as a push feed: after each durable commit the service calls `notify()`, ONE
 * shared reader fetches the new log entries and hands them to every live subscriber. No
 * subscriber reads the store on a commit; a subscriber reads it only to catch up from its resume
 * point (`after`), then joins the shared feed.
 *
 * Joining without a gap or a duplicate (one process; seq order = commit order here, since the
 * group committer has one batch in flight at a time):
 *   1. the subscriber is registered first: from then on every row the feed dispatches is kept for
 *      it (bounded; on overflow they are dropped and step 2 simply reads again);
 *   2. it reads pages from its cursor until a page is short (it reached the end as of that read);
 *   3. it delivers the kept rows above its cursor and turns live. A row committed after its last
 *      read was either dispatched already (so it was kept) or will be dispatched (it is live).
 * The feed itself starts from the log's last seq when its first subscriber arrives, and each
 * subscriber's catch-up waits for that, so no row falls between the two.
 *
 * Every row reaches a subscriber once, in seq order (`seq > cursor` filters the overlap).
 * Several writers on one database (PostgreSQL replicas) commit seqs out of order and do not
 * notify this process: `pollIntervalMs` re-reads on a timer, and guarantees N6 apply.
 */
import { RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { DecisionPageRows, DecisionRow } from '../store/port.js';

export interface DecisionSource {
  decisions(after: number, limit: number): Promise<DecisionPageRows>;
  lastSeq(): Promise<number>;
}

export interface FeedReset {
  readonly reason: 'pruned' | 'ahead';
  readonly requested: number;
  readonly resumeAfter: number;
  readonly oldestRetained: number;
}

/** Where a subscription's rows go (an SSE connection, or a test's list). */
export interface FeedConsumer {
  /** Rows in seq order; each seq once per subscription. */
  decisions(rows: readonly DecisionRow[]): void;
  /** The resume point could not be honoured; rows continue after `resumeAfter`. */
  reset(reset: FeedReset): void;
  /** Resolves when the consumer can take another page (true), or is gone (false). */
  ready(): Promise<boolean>;
  /** The store could not be read while catching up: the subscription is over. */
  failed(err: unknown): void;
}

export interface FeedSubscription {
  close(): void;
}

export interface DecisionFeedOptions {
  readonly source: DecisionSource;
  readonly logger: Logger;
  /** Rows per store read. Default 500. */
  readonly pageSize?: number;
  /** Rows kept per subscriber while it catches up; beyond, they are dropped and re-read. Default 10000. */
  readonly maxPendingRows?: number;
  /** Re-read on a timer while anyone listens (commits of other processes). 0 = never. Default 0. */
  readonly pollIntervalMs?: number;
  /** After a failed shared read, read again after this long. Default 1000. */
  readonly retryMs?: number;
}

class Subscriber {
  cursor = 0;
  live = false;
  #closed = false;
  pending: DecisionRow[] = [];
  /** Rows are being dropped (too many kept); the catch-up reads again. */
  overflowed = false;
  /** Times rows were dropped. */
  drops = 0;
  constructor(readonly consumer: FeedConsumer) {}

  /** A method, not a field: it changes while the catch-up awaits, which narrowing would hide. */
  gone(): boolean {
    return this.#closed;
  }

  close(): void {
    this.#closed = true;
    this.pending = [];
  }

  deliver(rows: readonly DecisionRow[]): void {
    const fresh = rows.filter((row) => row.seq > this.cursor);
    const last = fresh.at(-1);
    if (last === undefined) return;
    this.cursor = last.seq;
    this.consumer.decisions(fresh);
  }
}

export class DecisionFeed {
  readonly #source: DecisionSource;
  readonly #log: Logger;
  readonly #repeats = new RepeatGate();
  readonly #pageSize: number;
  readonly #maxPending: number;
  readonly #pollMs: number;
  readonly #retryMs: number;
  readonly #subs = new Set<Subscriber>();
  /** Bumped on every deactivation: reads of an older generation are ignored. */
  #generation = 0;
  #cursor: number | undefined;
  #activating: Promise<void> | undefined;
  #dirty = false;
  #readingGeneration: number | undefined;
  #poll: NodeJS.Timeout | undefined;
  #retry: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(options: DecisionFeedOptions) {
    this.#source = options.source;
    this.#log = options.logger;
    this.#pageSize = options.pageSize ?? 500;
    this.#maxPending = options.maxPendingRows ?? 10_000;
    this.#pollMs = options.pollIntervalMs ?? 0;
    this.#retryMs = options.retryMs ?? 1_000;
  }

  get subscribers(): number {
    return this.#subs.size;
  }

  /** New entries were committed. Cheap when nobody listens. */
  notify(): void {
    if (this.#subs.size === 0) return;
    this.#dirty = true;
    if (this.#cursor !== undefined) this.#startReading();
  }

  /** Rows after `after` (undefined: from the end of the log as it is now). */
  subscribe(consumer: FeedConsumer, after: number | undefined): FeedSubscription {
    const sub = new Subscriber(consumer);
    if (this.#closed) {
      consumer.failed(new Error('decision feed closed'));
      return { close: () => undefined };
    }
    this.#subs.add(sub);
    const activation = this.#activate();
    void this.#catchUp(sub, after, activation);
    return {
      close: () => {
        this.#remove(sub);
      },
    };
  }

  /** Drop every subscriber (their consumers are not called again) and stop reading. */
  close(): void {
    this.#closed = true;
    for (const sub of [...this.#subs]) this.#remove(sub);
  }

  #remove(sub: Subscriber): void {
    sub.close();
    if (!this.#subs.delete(sub) || this.#subs.size > 0) return;
    // Nobody listens: stop reading; the next subscriber starts again from the end of the log.
    this.#generation++;
    this.#cursor = undefined;
    this.#activating = undefined;
    this.#dirty = false;
    clearInterval(this.#poll);
    clearTimeout(this.#retry);
    this.#poll = undefined;
    this.#retry = undefined;
  }

  #activate(): Promise<void> {
    if (this.#cursor !== undefined) return Promise.resolve();
    if (this.#activating !== undefined) return this.#activating;
    const generation = this.#generation;
    const activating = this.#source.lastSeq().then((last) => {
      if (generation !== this.#generation) return;
      this.#cursor = last;
      if (this.#pollMs > 0) {
        this.#poll = setInterval(() => {
          this.notify();
        }, this.#pollMs);
        this.#poll.unref();
      }
      if (this.#dirty) this.#startReading();
    });
    // A failed activation is retried by the next subscriber; this one's catch-up fails.
    activating.catch(() => {
      if (this.#activating === activating) this.#activating = undefined;
    });
    this.#activating = activating;
    return activating;
  }

  #startReading(): void {
    if (this.#readingGeneration === this.#generation) return;
    void this.#readLoop(this.#generation);
  }

  async #readLoop(generation: number): Promise<void> {
    this.#readingGeneration = generation;
    try {
      while (this.#dirty && generation === this.#generation) {
        this.#dirty = false;
        for (;;) {
          const page = await this.#source.decisions(this.#cursor ?? 0, this.#pageSize);
          if (generation !== this.#generation) return;
          if (page.decisions.length > 0) {
            this.#cursor = page.next;
            this.#dispatch(page.decisions);
          }
          if (page.decisions.length < this.#pageSize) break;
        }
      }
    } catch (err) {
      if (generation !== this.#generation) return;
      const gate = this.#repeats.note('read', performance.now());
      if (gate.log) this.#log.warn({ err, repeated: gate.suppressed }, 'decision feed read failed; retrying');
      this.#dirty = true;
      clearTimeout(this.#retry);
      this.#retry = setTimeout(() => {
        this.#retry = undefined;
        this.notify();
      }, this.#retryMs);
      this.#retry.unref();
    } finally {
      if (this.#readingGeneration === generation) this.#readingGeneration = undefined;
    }
  }

  #dispatch(rows: readonly DecisionRow[]): void {
    for (const sub of this.#subs) {
      if (sub.live) sub.deliver(rows);
      else if (!sub.overflowed) {
        if (sub.pending.length + rows.length > this.#maxPending) {
          sub.overflowed = true;
          sub.drops++;
          sub.pending = [];
        } else sub.pending.push(...rows);
      }
    }
  }

  async #catchUp(sub: Subscriber, after: number | undefined, activation: Promise<void>): Promise<void> {
    try {
      await activation;
      if (sub.gone()) return;
      sub.cursor = after ?? (await this.#source.lastSeq());
      let first = after !== undefined;
      for (;;) {
        if (sub.gone()) return;
        sub.overflowed = false; // this read sees every row dispatched (and maybe dropped) so far
        const drops = sub.drops;
        const page = await this.#source.decisions(sub.cursor, this.#pageSize);
        if (sub.gone()) return;
        if (first) {
          first = false;
          await this.#checkResume(sub, page);
          if (sub.gone()) return;
        }
        sub.deliver(page.decisions);
        if (page.decisions.length >= this.#pageSize) {
          if (!(await sub.consumer.ready())) return;
          continue;
        }
        if (sub.drops !== drops) continue; // rows were dropped during the read: read again
        const pending = sub.pending;
        sub.pending = [];
        sub.live = true;
        sub.deliver(pending);
        return;
      }
    } catch (err) {
      if (sub.gone()) return;
      this.#remove(sub);
      sub.consumer.failed(err);
    }
  }

  /** Before the first page of a resumed subscription: was anything after `after` pruned, or is it past the end? */
  async #checkResume(sub: Subscriber, page: DecisionPageRows): Promise<void> {
    const requested = sub.cursor;
    if (page.oldestRetained > requested + 1) {
      const resumeAfter = page.oldestRetained - 1;
      sub.consumer.reset({ reason: 'pruned', requested, resumeAfter, oldestRetained: page.oldestRetained });
      return;
    }
    if (page.decisions.length > 0 || requested === 0) return;
    const last = await this.#source.lastSeq();
    if (requested > last) {
      sub.cursor = last;
      sub.consumer.reset({ reason: 'ahead', requested, resumeAfter: last, oldestRetained: page.oldestRetained });
    }
  }
}
