import { describe, expect, it } from 'vitest';
import { decideBatch, FENCED, type BatchReader, type BatchRules } from './batch.js';
import type { FenceOp } from './ops.js';

function reader(fences: Record<string, bigint>, payloads: Record<string, string> = {}) {
  const reads: string[] = [];
  const r: BatchReader = {
    fenceOf: (resource) => {
      reads.push(`fence:${resource}`);
      return fences[resource] ?? 0n;
    },
    payloadOf: (resource, resultId) => {
      reads.push(`payload:${resource}/${resultId}`);
      return payloads[`${resource}/${resultId}`];
    },
  };
  return { r, reads };
}

const advance = (resource: string, token: bigint): FenceOp => ({ kind: 'advance', resource, token });
const write = (resource: string, token: bigint, resultId: string, payload: string): FenceOp => ({
  kind: 'write',
  resource,
  token,
  resultId,
  workerId: 'w',
  payload,
});

describe('decideBatch', () => {
  it('decides over committed state plus the earlier ops of the same batch', () => {
    const { r } = reader({ a: 1n }, { 'a/x': '"old"' });
    const plan = decideBatch(
      r,
      [
        write('a', 1n, 'x', '"old"'),
        write('a', 1n, 'y', '"y1"'),
        write('a', 1n, 'y', '"y1"'),
        write('a', 1n, 'y', '"y2"'),
        advance('a', 3n),
        write('a', 1n, 'z', '"late"'),
        write('a', 3n, 'z', '"z"'),
        advance('a', 2n),
        advance('a', 3n),
        write('a', 4n, 'q', '"forged"'),
      ],
      42,
    );
    expect(plan.decisions).toEqual([
      { ok: true, outcome: 'replayed', fence: 1n },
      { ok: true, outcome: 'written', fence: 1n },
      { ok: true, outcome: 'replayed', fence: 1n },
      { ok: false, code: 'RESULT_CONFLICT', fence: 1n },
      { ok: true, outcome: 'advanced', fence: 3n },
      { ok: false, code: 'STALE_TOKEN', fence: 3n },
      { ok: true, outcome: 'written', fence: 3n },
      { ok: false, code: 'STALE_TOKEN', fence: 3n },
      { ok: true, outcome: 'unchanged', fence: 3n },
      { ok: false, code: 'FENCE_CONFLICT', fence: 3n },
    ]);
    expect([...plan.effects.fences]).toEqual([['a', 3n]]);
    expect(plan.effects.results.map((x) => [x.resultId, x.token, x.payload, x.writtenAtMs])).toEqual([
      ['y', 1n, '"y1"', 42],
      ['z', 3n, '"z"', 42],
    ]);
    expect(plan.effects.decisions.map((d) => [d.kind, d.fenceBefore, d.outcome])).toEqual([
      ['write', 1n, 'replayed'],
      ['write', 1n, 'written'],
      ['write', 1n, 'replayed'],
      ['write', 1n, 'RESULT_CONFLICT'],
      ['advance', 1n, 'advanced'],
      ['write', 3n, 'STALE_TOKEN'],
      ['write', 3n, 'written'],
      ['advance', 3n, 'STALE_TOKEN'],
      ['advance', 3n, 'unchanged'],
      ['write', 3n, 'FENCE_CONFLICT'],
    ]);
  });

  it('reads each key from the store at most once and skips payload reads for refused tokens', () => {
    const { r, reads } = reader({ a: 2n });
    decideBatch(
      r,
      [
        advance('a', 2n),
        advance('a', 3n),
        write('a', 2n, 'x', '1'),
        write('a', 3n, 'x', '1'),
        write('a', 3n, 'x', '1'),
      ],
      0,
    );
    expect(reads).toEqual(['fence:a', 'payload:a/x']);
  });

  it('a refused write never reads a stored payload', () => {
    const { r, reads } = reader({ a: 3n }, { 'a/y': '1' });
    decideBatch(r, [write('a', 2n, 'y', '1'), write('a', 4n, 'y', '1')], 0);
    expect(reads).toEqual(['fence:a']);
  });

  it('logs each decision with the result id and worker id of a write (none for an advance)', () => {
    const { r } = reader({});
    const { effects } = decideBatch(r, [advance('a', 1n), write('a', 1n, 'x', '1')], 7);
    expect(effects.decisions.map((d) => [d.kind, d.resultId, d.workerId, d.atMs])).toEqual([
      ['advance', undefined, undefined, 7],
      ['write', 'x', 'w', 7],
    ]);
  });

  it('reports only fences that grew, with their final value', () => {
    const { r } = reader({ a: 5n, b: 1n });
    const plan = decideBatch(r, [advance('a', 5n), advance('b', 2n), advance('b', 4n), advance('c', 1n)], 0);
    expect([...plan.effects.fences]).toEqual([
      ['b', 4n],
      ['c', 1n],
    ]);
  });

  it('an empty batch decides nothing', () => {
    const plan = decideBatch(reader({}).r, [], 0);
    expect(plan.decisions).toEqual([]);
    expect(plan.effects.decisions).toEqual([]);
  });
});

describe('injected batch rules (the writeFence seam)', () => {
  // A rule that judges each write against its own token: what the chaos runner's test entry
  // point injects to prove the checker catches a sink without the fence check.
  const ownToken: BatchRules = { writeFence: (op) => op.token };

  it.each([
    ['the default is FENCED: a stale write is refused', undefined, { ok: false, code: 'STALE_TOKEN' }],
    ['FENCED given explicitly', FENCED, { ok: false, code: 'STALE_TOKEN' }],
    ['another rule is applied', ownToken, { ok: true, outcome: 'written' }],
  ] as const)('%s', (_name, rules, expected) => {
    const plan = decideBatch(reader({ r: 5n }).r, [write('r', 3n, 'x', '"p"')], 0, rules);
    expect(plan.decisions[0]).toMatchObject(expected);
    // Whatever the rule, the decision log records the true fence before the op.
    expect(plan.effects.decisions[0]).toMatchObject({ token: 3n, fenceBefore: 5n });
  });

  it('under another rule a write still meets the stored result: replayed, or RESULT_CONFLICT', () => {
    const stored = reader({ r: 5n }, { 'r/x': '"p"' }).r;
    const plan = decideBatch(stored, [write('r', 3n, 'x', '"p"'), write('r', 3n, 'x', '"q"')], 0, ownToken);
    expect(plan.decisions).toMatchObject([
      { ok: true, outcome: 'replayed' },
      { ok: false, code: 'RESULT_CONFLICT' },
    ]);
    expect(plan.effects.results).toEqual([]);
  });
});
