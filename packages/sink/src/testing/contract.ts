/**
 * The fenced-store contract: one suite of cases every implementation of the sink must pass, run
 * against the in-process service over SQLite, the HTTP app (inject), and the HTTP client against a
 * listening server. A PostgreSQL store runs the same suite.
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

export interface ContractTarget {
  advance(resource: string, token: bigint): Promise<AdvanceDecision>;
  advanceBatch(items: readonly { resource: string; token: bigint }[]): Promise<AdvanceDecision[]>;
  write(write: ContractWrite): Promise<WriteDecision>;
  resource(resource: string): Promise<{ fence: bigint; results: readonly ContractResult[] }>;
  decisions(
    after: number,
    limit: number,
  ): Promise<{ decisions: readonly ContractDecision[]; next: number; oldestRetained: number }>;
  /** Op counts of committed batches so far, when the target can observe them. */
  readonly batchSizes?: () => readonly number[];
  close(): Promise<void>;
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

const adv = (resource: string, token: bigint): Step => ({ kind: 'advance', resource, token });
const wr = (resource: string, token: bigint, resultId: string, payload: JsonValue, workerId = 'w-1'): Step => ({
  kind: 'write',
  resource,
  token,
  resultId,
  workerId,
  payload,
});

export function describeFenceContract(name: string, open: () => Promise<ContractTarget>): void {
  describe(`fence contract: ${name}`, () => {
    let target: ContractTarget;
    beforeEach(async () => {
      target = await open();
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
      // Fired without awaiting: they arrive together and are committed as group(s).
      const answers = await Promise.all(steps.map((s) => runOnTarget(target, s)));
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
  });
}

function step(resource: string, token: bigint, resultId: string, payload: JsonValue): ContractWrite {
  return { resource, token, resultId, workerId: 'w-1', payload };
}
