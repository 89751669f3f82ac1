/**
 * The fenced-store contract: one suite of cases every implementation of the sink must pass, run
 * against the in-process service over SQLite (in-thread and in a worker thread), the HTTP app
 * (inject), and the HTTP client against a listening server — and the same three over PostgreSQL.
 *
 * Expected answers come from `FencedStore` of @leasehold/protocol (the reference model) wherever a
 * sequence is involved, so the suite checks "same answers as the model", not hand-copied values.
 */
import { FencedStore, type AdvanceDecision, type JsonValue, type WriteDecision } from '@leasehold/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

export interface ContractResult {
  readonly resultId: string;
  readonly token: bigint;
  readonly workerId: string;
  readonly payload: JsonValue;
}

export interface ContractDecision {
  readonly seq: number;
  readonly kind: 'advance' | 'write';
  readonly resource: string;
  readonly token: bigint;
  readonly fenceBefore: bigint;
  readonly outcome: string;
  readonly resultId?: string | undefined;
}

export interface ContractWrite {
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
  readonly workerId: string;
  readonly payload: JsonValue;
}

/** How a target is built: the sink's settings the suite varies. */
export interface ContractOptions {
  /** The sink's READ_PAGE_MAX_BYTES (default: the sink's default). */
  readonly readPageMaxBytes?: number;
}

/** A page query in wire form: the cursor as the string `next` gave, the limit as a number. */
export interface ContractPageQuery {
  readonly after?: string;
  readonly limit?: number;
}

export interface ContractPage {
  readonly fence: bigint;
  readonly results: readonly ContractResult[];
  readonly next: string;
  readonly hasMore: boolean;
  /** Bytes of the HTTP response body, where the target sees it. */
  readonly bodyBytes?: number;
}

export interface ContractTarget {
  /** `http` targets answer bad input with an HTTP status, carried as `status` on the error. */
  readonly kind: 'service' | 'http' | 'client';
  advance(resource: string, token: bigint): Promise<AdvanceDecision>;
  advanceBatch(items: readonly { resource: string; token: bigint }[]): Promise<AdvanceDecision[]>;
  write(write: ContractWrite): Promise<WriteDecision>;
  /**
   * Several writes in one batch request, answered in order (`POST /v1/writes/batch`, where the
   * target has it; the client batches concurrent writes itself, the service has no batch).
   */
  writeBatch?(writes: readonly ContractWrite[]): Promise<WriteDecision[]>;
  /** One page of a resource's results. Bad input rejects with `{ code: 'INVALID_MESSAGE' }`. */
  resourcePage(resource: string, query?: ContractPageQuery): Promise<ContractPage>;
  /** Every result of a resource (a walk over its pages) and the fence of the last page. */
  resource(resource: string): Promise<{ fence: bigint; results: readonly ContractResult[] }>;
  decisions(
    after: number,
    limit: number,
  ): Promise<{ decisions: readonly ContractDecision[]; next: number; oldestRetained: number }>;
  /**
   * The target holds writes back to send them together (the client's write batching), so a write
   * and an advance fired at once may reach the sink in either order; writes fired at once keep theirs.
   */
  readonly batchesWrites?: boolean;
  /** Op counts of committed batches so far, when the target can observe them. */
  readonly batchSizes?: () => readonly number[];
  close(): Promise<void>;
}

/** Every page of a resource, from the first, following `next` while `hasMore`. */
export async function readWholeResource(
  page: (resource: string, query?: ContractPageQuery) => Promise<ContractPage>,
  resource: string,
): Promise<{ fence: bigint; results: ContractResult[] }> {
  const results: ContractResult[] = [];
  let current = await page(resource);
  results.push(...current.results);
  for (let pages = 1; current.hasMore; pages++) {
    if (pages > 10_000) throw new Error(`the walk of ${resource} makes no progress`);
    current = await page(resource, { after: current.next });
    results.push(...current.results);
  }
  return { fence: current.fence, results };
}

/** What the route sends for a result (an upper-bound stand-in for writtenAtMs). */
function wireBytes(resource: string, r: ContractResult): number {
  const wire = { resource, resultId: r.resultId, token: String(r.token), workerId: r.workerId, payload: r.payload };
  return Buffer.byteLength(JSON.stringify({ ...wire, writtenAtMs: 1_000_000_000_000_000 }));
}

/** Writes at `token`, in chunks fired together (group commit), in `ids` order per chunk. */
async function writeAll(
  target: ContractTarget,
  resource: string,
  token: bigint,
  ids: readonly string[],
  payload: (id: string) => JsonValue,
) {
  for (let at = 0; at < ids.length; at += 250) {
    const chunk = ids.slice(at, at + 250);
    const answers = await Promise.all(chunk.map((id) => target.write(step(resource, token, id, payload(id)))));
    expect(answers.filter((a) => !a.ok)).toEqual([]);
  }
}

type Step =
  | { readonly kind: 'advance'; readonly resource: string; readonly token: bigint }
  | ({ readonly kind: 'write' } & ContractWrite);

function runOnModel(model: FencedStore, step: Step): AdvanceDecision | WriteDecision {
  return step.kind === 'advance'
    ? model.advance(step.resource, step.token)
    : model.write(step.resource, step.token, step.resultId, step.payload);
}

function runOnTarget(target: ContractTarget, step: Step): Promise<AdvanceDecision | WriteDecision> {
  return step.kind === 'advance' ? target.advance(step.resource, step.token) : target.write(step);
}

const write = (resource: string, token: bigint, resultId: string, payload: JsonValue): ContractWrite => ({
  resource,
  token,
  resultId,
  workerId: 'w-1',
  payload,
});
const adv = (resource: string, token: bigint): Step => ({ kind: 'advance', resource, token });
const wr = (resource: string, token: bigint, resultId: string, payload: JsonValue, workerId = 'w-1'): Step => ({
  kind: 'write',
  resource,
  token,
  resultId,
  workerId,
  payload,
});

export function describeFenceContract(name: string, open: (options: ContractOptions) => Promise<ContractTarget>): void {
  describe(`fence contract: ${name}`, () => {
    let target: ContractTarget;
    beforeEach(async () => {
      target = await open({});
    });
    afterEach(async () => {
      await target.close();
    });

    it('advance grows the fence; the same token again is unchanged; a lower one is STALE_TOKEN', async () => {
      expect(await target.advance('jobs/a', 1n)).toEqual({ ok: true, outcome: 'advanced', fence: 1n });
      expect(await target.advance('jobs/a', 5n)).toEqual({ ok: true, outcome: 'advanced', fence: 5n });
      expect(await target.advance('jobs/a', 5n)).toEqual({ ok: true, outcome: 'unchanged', fence: 5n });
      expect(await target.advance('jobs/a', 4n)).toEqual({ ok: false, code: 'STALE_TOKEN', fence: 5n });
      expect((await target.resource('jobs/a')).fence).toBe(5n);
    });

    it('a write at the fence is stored; same payload replays (any key order); different payload conflicts', async () => {
      await target.advance('jobs/b', 3n);
      const first = { n: 1, list: [1, 2], nested: { y: 'x', a: null } };
      expect(await target.write(step('jobs/b', 3n, 'r-1', first))).toEqual({ ok: true, outcome: 'written', fence: 3n });
      const reordered = { nested: { a: null, y: 'x' }, list: [1, 2], n: 1 };
      expect(await target.write(step('jobs/b', 3n, 'r-1', reordered))).toEqual({
        ok: true,
        outcome: 'replayed',
        fence: 3n,
      });
      expect(await target.write(step('jobs/b', 3n, 'r-1', { n: 2 }))).toEqual({
        ok: false,
        code: 'RESULT_CONFLICT',
        fence: 3n,
      });
      const view = await target.resource('jobs/b');
      expect(view.results).toEqual([{ resultId: 'r-1', token: 3n, workerId: 'w-1', payload: first }]);
    });

    it('a write below the fence is STALE_TOKEN, above it FENCE_CONFLICT, on a never-advanced resource FENCE_CONFLICT', async () => {
      await target.advance('jobs/c', 3n);
      await target.advance('jobs/c', 4n);
      expect(await target.write(step('jobs/c', 3n, 'r-1', 'old'))).toEqual({
        ok: false,
        code: 'STALE_TOKEN',
        fence: 4n,
      });
      expect(await target.write(step('jobs/c', 9n, 'r-1', 'forged'))).toEqual({
        ok: false,
        code: 'FENCE_CONFLICT',
        fence: 4n,
      });
      expect(await target.write(step('jobs/never', 1n, 'r-1', 'x'))).toEqual({
        ok: false,
        code: 'FENCE_CONFLICT',
        fence: 0n,
      });
      expect((await target.resource('jobs/c')).results).toEqual([]);
      expect(await target.resource('jobs/never')).toEqual({ fence: 0n, results: [] });
    });

    it('resources are independent: a takeover of one does not fence another', async () => {
      await target.advance('tenant/1', 2n);
      await target.advance('tenant/2', 2n);
      await target.advance('tenant/1', 10n);
      expect(await target.write(step('tenant/2', 2n, 'same-id', 1))).toEqual({
        ok: true,
        outcome: 'written',
        fence: 2n,
      });
      expect(await target.write(step('tenant/1', 10n, 'same-id', 2))).toEqual({
        ok: true,
        outcome: 'written',
        fence: 10n,
      });
      expect((await target.resource('tenant/2')).fence).toBe(2n);
      expect((await target.resource('tenant/1')).results.map((r) => r.payload)).toEqual([2]);
    });

    it('a batch advance answers each item in order, with mixed outcomes', async () => {
      const items = [
        { resource: 'b/a', token: 5n },
        { resource: 'b/b', token: 3n },
        { resource: 'b/a', token: 4n },
        { resource: 'b/a', token: 5n },
        { resource: 'b/b', token: 7n },
      ];
      const model = new FencedStore();
      expect(await target.advanceBatch(items)).toEqual(items.map((i) => model.advance(i.resource, i.token)));
      expect((await target.resource('b/a')).fence).toBe(5n);
      expect((await target.resource('b/b')).fence).toBe(7n);
    });

    it('a batch of writes is decided item by item, in order, as the model decides them one by one', async () => {
      const model = new FencedStore();
      for (const [resource, token] of [
        ['wb/a', 5n],
        ['wb/b', 3n],
      ] as const) {
        expect(await target.advance(resource, token)).toEqual(model.advance(resource, token));
      }
      const writes: ContractWrite[] = [
        write('wb/a', 5n, 'r-1', { v: 1 }),
        write('wb/a', 5n, 'r-1', { v: 1 }), // replayed, within the same batch
        write('wb/a', 5n, 'r-1', { v: 2 }), // RESULT_CONFLICT
        write('wb/a', 4n, 'r-2', 'old'), // STALE_TOKEN
        write('wb/a', 6n, 'r-3', 'forged'), // FENCE_CONFLICT
        write('wb/b', 3n, 'r-1', { v: 9 }), // the same result id on another resource
        write('wb/never', 1n, 'r-1', 'x'), // FENCE_CONFLICT at 0
        write('wb/a', 5n, 'r-4', [1, 2]),
      ];
      const expected = writes.map((w) => model.write(w.resource, w.token, w.resultId, w.payload));
      const answers =
        target.writeBatch === undefined
          ? await Promise.all(writes.map((w) => target.write(w)))
          : await target.writeBatch(writes);
      expect(answers).toEqual(expected);
      expect(expected.map((d) => (d.ok ? d.outcome : d.code))).toEqual([
        'written',
        'replayed',
        'RESULT_CONFLICT',
        'STALE_TOKEN',
        'FENCE_CONFLICT',
        'written',
        'FENCE_CONFLICT',
        'written',
      ]);
      expect((await target.resource('wb/a')).results.map((r) => [r.resultId, r.payload])).toEqual([
        ['r-1', { v: 1 }],
        ['r-4', [1, 2]],
      ]);
      expect((await target.resource('wb/b')).results.map((r) => r.payload)).toEqual([{ v: 9 }]);
    });

    it('concurrent interleaved requests on one resource get the answers of sequential execution', async () => {
      const steps: Step[] = [
        adv('g/r', 1n),
        wr('g/r', 1n, 'x', { v: 1 }),
        wr('g/r', 1n, 'x', { v: 1 }),
        wr('g/r', 1n, 'x', { v: 2 }),
        adv('g/r', 2n),
        wr('g/r', 1n, 'y', 'late'),
        wr('g/r', 2n, 'y', 'new'),
        wr('g/r', 2n, 'y', 'other'),
        adv('g/r', 1n),
        adv('g/r', 2n),
        wr('g/r', 3n, 'z', 'forged'),
        adv('g/s', 1n),
        wr('g/s', 1n, 'x', { v: 9 }),
      ];
      const model = new FencedStore();
      const expected = steps.map((s) => runOnModel(model, s));
      // Fired without awaiting: they arrive together and are committed as group(s). A target that
      // batches writes keeps only the order of writes fired at once: each run of one kind together.
      const answers: (AdvanceDecision | WriteDecision)[] = [];
      if (target.batchesWrites === true) {
        for (let at = 0; at < steps.length;) {
          let end = at;
          while (end < steps.length && steps[end]?.kind === steps[at]?.kind) end++;
          answers.push(...(await Promise.all(steps.slice(at, end).map((s) => runOnTarget(target, s)))));
          at = end;
        }
      } else {
        answers.push(...(await Promise.all(steps.map((s) => runOnTarget(target, s)))));
      }
      expect(answers).toEqual(expected);
      const sizes = target.batchSizes?.();
      if (sizes !== undefined) expect(Math.max(...sizes)).toBeGreaterThan(1);
      const view = await target.resource('g/r');
      expect(view.fence).toBe(2n);
      expect(view.results.map((r) => [r.resultId, r.payload])).toEqual([
        ['x', { v: 1 }],
        ['y', 'new'],
      ]);
    });

    it('the decision log records every decision in order and pages with its cursor', async () => {
      const steps: Step[] = [
        adv('d/1', 2n),
        wr('d/1', 2n, 'a', 1),
        adv('d/1', 1n),
        wr('d/1', 2n, 'a', 2),
        adv('d/2', 1n),
      ];
      for (const s of steps) await runOnTarget(target, s);
      await target.advanceBatch([
        { resource: 'd/1', token: 3n },
        { resource: 'd/2', token: 1n },
      ]);
      const all = await target.decisions(0, 100);
      expect(all.decisions.map((d) => [d.kind, d.resource, d.token, d.fenceBefore, d.outcome])).toEqual([
        ['advance', 'd/1', 2n, 0n, 'advanced'],
        ['write', 'd/1', 2n, 2n, 'written'],
        ['advance', 'd/1', 1n, 2n, 'STALE_TOKEN'],
        ['write', 'd/1', 2n, 2n, 'RESULT_CONFLICT'],
        ['advance', 'd/2', 1n, 0n, 'advanced'],
        ['advance', 'd/1', 3n, 2n, 'advanced'],
        ['advance', 'd/2', 1n, 1n, 'unchanged'],
      ]);
      expect(all.decisions[1]?.resultId).toBe('a');
      const seqs = all.decisions.map((d) => d.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
      expect(new Set(seqs).size).toBe(seqs.length);
      expect(all.next).toBe(seqs.at(-1));
      expect(all.oldestRetained).toBe(seqs[0]);

      const paged: number[] = [];
      let after = 0;
      for (;;) {
        const page = await target.decisions(after, 2);
        if (page.decisions.length === 0) {
          expect(page.next).toBe(after);
          break;
        }
        expect(page.decisions.length).toBeLessThanOrEqual(2);
        paged.push(...page.decisions.map((d) => d.seq));
        after = page.next;
      }
      expect(paged).toEqual(seqs);
    });

    describe('resource pages', () => {
      const ids = (prefix: string, n: number) =>
        Array.from({ length: n }, (_, i) => `${prefix}-${String(i).padStart(4, '0')}`);

      it('pages results in the order they were stored, each page with the fence; a walk returns each once', async () => {
        await target.advance('p/a', 4n);
        // Stored order differs from id order: an id-ordered view would fail the order check.
        const order = [
          'm',
          'c',
          'x',
          'a',
          'q',
          'b',
          'z',
          'k',
          'd',
          'y',
          'e',
          'p',
          'f',
          'o',
          'g',
          'n',
          'h',
          'w',
          'i',
          'l',
        ];
        for (const id of order) expect(await target.write(step('p/a', 4n, id, { id }))).toMatchObject({ ok: true });
        const pages: ContractPage[] = [];
        let after: string | undefined;
        for (;;) {
          const page = await target.resourcePage('p/a', { ...(after === undefined ? {} : { after }), limit: 6 });
          pages.push(page);
          expect(pages.length, 'the walk makes progress').toBeLessThan(20);
          expect(page.fence).toBe(4n);
          expect(page.results.length).toBeLessThanOrEqual(6);
          if (!page.hasMore) break;
          expect(page.next).not.toBe(after);
          after = page.next;
        }
        expect(pages.map((p) => p.results.length)).toEqual([6, 6, 6, 2]);
        expect(pages.flatMap((p) => p.results.map((r) => r.resultId))).toEqual(order);
        expect(pages[0]?.results[0]).toEqual({ resultId: 'm', token: 4n, workerId: 'w-1', payload: { id: 'm' } });
        // Past the end: empty, the cursor stays, nothing more.
        const last = pages.at(-1)?.next ?? '';
        expect(await target.resourcePage('p/a', { after: last })).toMatchObject({
          fence: 4n,
          results: [],
          next: last,
          hasMore: false,
        });
        // limit 0: the fence and whether there are results, nothing else.
        expect(await target.resourcePage('p/a', { limit: 0 })).toMatchObject({
          fence: 4n,
          results: [],
          next: '0',
          hasMore: true,
        });
        expect(await target.resourcePage('p/never', { limit: 0 })).toMatchObject({
          fence: 0n,
          results: [],
          hasMore: false,
        });
      });

      it('a walk while writes land returns every result exactly once in stored order, and each page the fence of its moment', async () => {
        let fence = 1n;
        await target.advance('p/b', fence);
        await writeAll(target, 'p/b', fence, ids('z', 10), (id) => id);
        const seen: string[] = [];
        let after = '0';
        for (let round = 0; ; round++) {
          const page = await target.resourcePage('p/b', { after, limit: 4 });
          expect(page.fence).toBe(fence);
          seen.push(...page.results.map((r) => r.resultId));
          after = page.next;
          if (round >= 6 && !page.hasMore) break;
          if (round < 6) {
            // New results sort before everything seen (an id cursor would skip them); a takeover mid-walk.
            if (round === 3) {
              fence = 7n;
              await target.advance('p/b', fence);
            }
            await writeAll(target, 'p/b', fence, ids(`a${round}`, 3), (id) => id);
          }
          expect(round).toBeLessThan(40);
        }
        const stored = (await target.resource('p/b')).results.map((r) => r.resultId);
        expect(stored.length).toBe(10 + 6 * 3);
        expect(seen).toEqual(stored);
        expect(new Set(seen).size).toBe(seen.length);
      });

      it('holds at most 1000 results a page: 1009 results are two pages without a query, fewer with ?limit', async () => {
        await target.advance('p/c', 2n);
        await writeAll(target, 'p/c', 2n, ids('r', 1009), (id) => id.length);
        const first = await target.resourcePage('p/c');
        expect(first.results.length).toBe(1000);
        expect(first.hasMore).toBe(true);
        const second = await target.resourcePage('p/c', { after: first.next });
        expect(second.results.length).toBe(9);
        expect(second.hasMore).toBe(false);
        expect(new Set([...first.results, ...second.results].map((r) => r.resultId)).size).toBe(1009);
        expect((await target.resourcePage('p/c', { limit: 1 })).results.length).toBe(1);
        expect((await target.resourcePage('p/c', { limit: 999, after: first.next })).results.length).toBe(9);
        for (const limit of [1001, -1, 1.5]) {
          const err = await target.resourcePage('p/c', { limit }).catch((e: unknown) => e);
          expect(err, `limit ${limit}`).toMatchObject({ code: 'INVALID_MESSAGE' });
          if (target.kind === 'http') expect(err).toMatchObject({ status: 400 });
        }
      });

      it('a bad cursor is INVALID_MESSAGE (400) and changes nothing', async () => {
        await target.advance('p/d', 3n);
        await writeAll(target, 'p/d', 3n, ids('r', 3), () => 1);
        const before = await target.resource('p/d');
        for (const after of ['abc', '-1', '01', '1.5', ' 1', '9223372036854775808', '']) {
          const err = await target.resourcePage('p/d', { after }).catch((e: unknown) => e);
          expect(err, `after ${JSON.stringify(after)}`).toMatchObject({ code: 'INVALID_MESSAGE' });
          if (target.kind === 'http') expect(err).toMatchObject({ status: 400 });
        }
        expect(await target.resource('p/d')).toEqual(before);
        expect(await target.advance('p/d', 3n)).toEqual({ ok: true, outcome: 'unchanged', fence: 3n });
      });

      it('stays within the page byte budget: large results make pages shorter, one over the budget comes alone', async () => {
        const budget = 48 * 1024;
        await target.close();
        target = await open({ readPageMaxBytes: budget });
        await target.advance('p/e', 5n);
        const big = (id: string) => (id === 'r-0004' ? 'B'.repeat(60_000) : 's'.repeat(20_000));
        for (const id of ids('r', 10))
          expect(await target.write(step('p/e', 5n, id, big(id)))).toMatchObject({ ok: true });
        const pages: ContractPage[] = [];
        let after = '0';
        for (;;) {
          const page = await target.resourcePage('p/e', { after });
          pages.push(page);
          expect(pages.length, 'the walk makes progress').toBeLessThan(20);
          const bytes = page.results.reduce((n, r) => n + wireBytes('p/e', r), 0);
          if (page.results.length > 1) expect(bytes).toBeLessThanOrEqual(budget);
          if (page.results.length > 1 && page.bodyBytes !== undefined)
            expect(page.bodyBytes).toBeLessThanOrEqual(budget);
          if (!page.hasMore) break;
          after = page.next;
        }
        // Two 20 kB results fit in 48 KiB, three do not; the 60 kB one (over the budget) is alone.
        expect(pages.map((p) => p.results.map((r) => r.resultId))).toEqual([
          ['r-0000', 'r-0001'],
          ['r-0002', 'r-0003'],
          ['r-0004'],
          ['r-0005', 'r-0006'],
          ['r-0007', 'r-0008'],
          ['r-0009'],
        ]);
        expect(pages[2]?.results[0]?.payload).toBe('B'.repeat(60_000));
      });
    });
  });
}

function step(resource: string, token: bigint, resultId: string, payload: JsonValue): ContractWrite {
  return { resource, token, resultId, workerId: 'w-1', payload };
}
