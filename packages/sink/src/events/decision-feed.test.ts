/**
 * The shared decision feed: every subscriber gets every entry after its resume point exactly
 * once, in order, however reads, commits, notifications and subscriptions interleave (a
 * fast-check scheduler decides the order of every store read and every consumer `ready`).
 */
import fc from 'fast-check';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { DecisionPageRows, DecisionRow } from '../store/port.js';
import { DecisionFeed, type DecisionSource, type FeedConsumer, type FeedReset } from './decision-feed.js';

const silent = pino({ level: 'silent' });

const row = (seq: number): DecisionRow => ({
  seq,
  kind: 'advance',
  resource: `r${seq % 3}`,
  token: BigInt(seq),
  fenceBefore: 0n,
  outcome: 'advanced',
  resultId: undefined,
  workerId: undefined,
  atMs: seq,
});

/** An in-memory log; each read takes its snapshot when `delay` lets it run. */
class MemoryLog implements DecisionSource {
  rows: DecisionRow[] = [];
  #next = 1;
  reads = 0;
  constructor(readonly delay: <T>(value: () => T) => Promise<T> = (v) => Promise.resolve().then(v)) {}

  commit(n: number): void {
    for (let i = 0; i < n; i++) this.rows.push(row(this.#next++));
  }

  prune(upTo: number): void {
    this.rows = this.rows.filter((r) => r.seq > upTo);
  }

  decisions(after: number, limit: number): Promise<DecisionPageRows> {
    this.reads++;
    return this.delay(() => {
      const decisions = this.rows.filter((r) => r.seq > after).slice(0, limit);
      return { decisions, next: decisions.at(-1)?.seq ?? after, oldestRetained: this.rows[0]?.seq ?? 0 };
    });
  }

  lastSeq(): Promise<number> {
    return this.delay(() => this.rows.at(-1)?.seq ?? 0);
  }
}

class Recorder implements FeedConsumer {
  seqs: number[] = [];
  resets: FeedReset[] = [];
  error: unknown;
  constructor(readonly readyGate: () => Promise<boolean> = () => Promise.resolve(true)) {}
  decisions(rows: readonly DecisionRow[]): void {
    this.seqs.push(...rows.map((r) => r.seq));
  }
  reset(reset: FeedReset): void {
    this.resets.push(reset);
  }
  ready(): Promise<boolean> {
    return this.readyGate();
  }
  failed(err: unknown): void {
    this.error = err;
  }
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i + 1);

/** Let every queued promise chain run (no scheduler). */
const settle = async () => {
  for (let i = 0; i < 50; i++) await Promise.resolve();
};

type Action =
  | { readonly kind: 'commit'; readonly n: number }
  | { readonly kind: 'subscribe'; readonly after: number | undefined }
  | { readonly kind: 'close'; readonly which: number }
  | { readonly kind: 'run'; readonly steps: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant('commit' as const), n: fc.integer({ min: 1, max: 7 }) }),
  fc.record({
    kind: fc.constant('subscribe' as const),
    after: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined }),
  }),
  fc.record({ kind: fc.constant('close' as const), which: fc.nat(5) }),
  fc.record({ kind: fc.constant('run' as const), steps: fc.integer({ min: 1, max: 6 }) }),
);

describe('DecisionFeed', () => {
  it('gives each subscriber every entry after its resume point once, in order, under any interleaving', async () => {
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(actionArb, { minLength: 1, maxLength: 40 }), async (s, actions) => {
        // A read takes its snapshot at one scheduled moment and answers at a later one.
        const log = new MemoryLog((value) =>
          s.schedule(Promise.resolve()).then(() => s.schedule(Promise.resolve(value()))),
        );
        const feed = new DecisionFeed({ source: log, logger: silent, pageSize: 3, maxPendingRows: 4 });
        const subs: { rec: Recorder; after: number | undefined; headAtStart: number; close: () => void }[] = [];
        const closed = new Set<number>();
        for (const action of actions) {
          if (action.kind === 'commit') {
            log.commit(action.n);
            feed.notify();
          } else if (action.kind === 'subscribe') {
            const rec = new Recorder(() => s.schedule(Promise.resolve(true)));
            const after = action.after === undefined ? undefined : Math.min(action.after, log.rows.length);
            const sub = feed.subscribe(rec, after);
            subs.push({
              rec,
              after,
              headAtStart: log.rows.length,
              close: () => {
                sub.close();
              },
            });
          } else if (action.kind === 'close') {
            const at = action.which % Math.max(1, subs.length);
            subs[at]?.close();
            closed.add(at);
          } else {
            for (let i = 0; i < action.steps; i++) {
              await settle();
              if (s.count() === 0) break;
              await s.waitNext(1);
            }
          }
        }
        for (;;) {
          await settle(); // continuations schedule their next read a few microtasks later
          if (s.count() === 0) break;
          await s.waitIdle();
        }
        const head = log.rows.length;
        subs.forEach((sub, at) => {
          if (closed.has(at)) return;
          expect(sub.rec.error).toBeUndefined();
          expect(sub.rec.resets).toEqual([]);
          if (sub.after !== undefined) {
            expect(sub.rec.seqs).toEqual(range(sub.after, head));
          } else {
            // From now: starts at the end of the log as some read after subscribing saw it.
            const start = (sub.rec.seqs[0] ?? head + 1) - 1;
            expect(start).toBeGreaterThanOrEqual(sub.headAtStart);
            expect(sub.rec.seqs).toEqual(range(start, head));
          }
        });
      }),
      { numRuns: 300 },
    );
  });

  it('reads again when rows were dropped (too many kept) while its last catch-up read was in flight', async () => {
    // Reads of the subscriber (after 0) are held after their snapshot until the test lets them go.
    const held: (() => void)[] = [];
    let holdCatchUp = false;
    const log = new MemoryLog(<T>(value: () => T) => {
      const snapshot = value();
      if (!holdCatchUp) return Promise.resolve(snapshot);
      holdCatchUp = false;
      return new Promise<T>((resolve) => {
        held.push(() => {
          resolve(snapshot);
        });
      });
    });
    log.commit(1);
    const feed = new DecisionFeed({ source: log, logger: silent, pageSize: 3, maxPendingRows: 2 });
    const other = new Recorder();
    feed.subscribe(other, undefined); // keeps the shared reader busy
    await settle();
    holdCatchUp = true;
    const rec = new Recorder();
    feed.subscribe(rec, 0);
    await settle();
    expect(held).toHaveLength(1); // its read saw only row 1
    log.commit(5);
    feed.notify();
    await settle(); // the shared reader dispatched 2..6: more than 2 kept, so dropped
    held.shift()?.();
    await settle();
    expect(rec.seqs).toEqual([1, 2, 3, 4, 5, 6]);
    expect(other.seqs).toEqual([2, 3, 4, 5, 6]);
  });

  it('reads the store once per commit for all live subscribers, not once per subscriber', async () => {
    const log = new MemoryLog();
    const feed = new DecisionFeed({ source: log, logger: silent });
    const recs = Array.from({ length: 10 }, () => new Recorder());
    for (const rec of recs) feed.subscribe(rec, 0);
    await settle();
    const before = log.reads;
    log.commit(2);
    feed.notify();
    await settle();
    expect(log.reads - before).toBe(1);
    for (const rec of recs) expect(rec.seqs).toEqual([1, 2]);
  });

  it('does not read at all while nobody listens', async () => {
    const log = new MemoryLog();
    const feed = new DecisionFeed({ source: log, logger: silent });
    log.commit(3);
    feed.notify();
    const sub = feed.subscribe(new Recorder(), undefined);
    await settle();
    sub.close();
    const reads = log.reads;
    log.commit(3);
    feed.notify();
    await settle();
    expect(log.reads).toBe(reads);
  });

  it('says so (reset pruned) when entries after the resume point were pruned, then continues from the oldest kept', async () => {
    const log = new MemoryLog();
    log.commit(10);
    log.prune(6);
    const feed = new DecisionFeed({ source: log, logger: silent });
    const rec = new Recorder();
    feed.subscribe(rec, 2);
    await settle();
    expect(rec.resets).toEqual([{ reason: 'pruned', requested: 2, resumeAfter: 6, oldestRetained: 7 }]);
    expect(rec.seqs).toEqual([7, 8, 9, 10]);
    // Resuming right below the oldest kept entry is no loss.
    const exact = new Recorder();
    feed.subscribe(exact, 6);
    await settle();
    expect(exact.resets).toEqual([]);
    expect(exact.seqs).toEqual([7, 8, 9, 10]);
  });

  it('says so (reset ahead) when the resume point is past the end of the log, then follows from the end', async () => {
    const log = new MemoryLog();
    log.commit(4);
    const feed = new DecisionFeed({ source: log, logger: silent });
    const rec = new Recorder();
    feed.subscribe(rec, 50);
    await settle();
    expect(rec.resets).toEqual([{ reason: 'ahead', requested: 50, resumeAfter: 4, oldestRetained: 1 }]);
    log.commit(1);
    feed.notify();
    await settle();
    expect(rec.seqs).toEqual([5]);
  });

  it('catching up waits for the consumer between pages (backpressure), and a gone consumer stops reading', async () => {
    const log = new MemoryLog();
    log.commit(10);
    const feed = new DecisionFeed({ source: log, logger: silent, pageSize: 4 });
    let open: (ok: boolean) => void = () => undefined;
    const rec = new Recorder(() => new Promise((resolve) => (open = resolve)));
    feed.subscribe(rec, 0);
    await settle();
    expect(rec.seqs).toEqual([1, 2, 3, 4]);
    open(true);
    await settle();
    expect(rec.seqs).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const reads = log.reads;
    open(false);
    await settle();
    expect(log.reads).toBe(reads);
    expect(rec.seqs).toHaveLength(8);
  });

  it('a failed read while catching up ends that subscription; a failed shared read is retried', async () => {
    const log = new MemoryLog();
    log.commit(2);
    let fail = true;
    const flaky: DecisionSource = {
      decisions: (after, limit) => (fail ? Promise.reject(new Error('store down')) : log.decisions(after, limit)),
      lastSeq: () => log.lastSeq(),
    };
    const feed = new DecisionFeed({ source: flaky, logger: silent, retryMs: 5 });
    const early = new Recorder();
    feed.subscribe(early, 0);
    await settle();
    expect(early.error).toBeInstanceOf(Error);
    fail = false;
    const live = new Recorder();
    feed.subscribe(live, 0);
    await settle();
    expect(live.seqs).toEqual([1, 2]);
    fail = true;
    log.commit(1);
    feed.notify();
    await settle();
    fail = false;
    await expect.poll(() => live.seqs, { timeout: 2_000 }).toEqual([1, 2, 3]);
  });
});
