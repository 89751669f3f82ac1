/**
 * Model-based property: random sequences of advances, batch advances and writes, fired in random
 * concurrent groups, get exactly the answers the reference model (`FencedStore` of
 * @leasehold/protocol) gives when run one at a time in arrival order; and the end state matches.
 */
import {
  FencedStore,
  canonicalJson,
  type AdvanceDecision,
  type JsonValue,
  type WriteDecision,
} from '@leasehold/protocol';
import fc from 'fast-check';

const hasUnsafeInteger = (v: unknown): boolean =>
  typeof v === 'number'
    ? Number.isInteger(v) && !Number.isSafeInteger(v)
    : v !== null && typeof v === 'object' && Object.values(v).some(hasUnsafeInteger);
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { FencedService } from './service/fenced-service.js';
import { SqliteFenceStore } from './store/sqlite-store.js';
import type { ContractTarget } from './testing/contract.js';
import { injectTarget, serviceTarget } from './testing/targets.js';

type Cmd =
  | { kind: 'advance'; resource: string; token: bigint }
  | { kind: 'batch'; items: { resource: string; token: bigint }[] }
  | { kind: 'write'; resource: string; token: bigint; resultId: string; payload: JsonValue };

const resource = fc.constantFrom('r/1', 'r/2', 'r/3');
const token = fc.bigInt({ min: 1n, max: 6n });
const payload = fc.oneof(
  fc.constantFrom<JsonValue>(1, 'a', null, { a: 1, b: [1, 2] }, { b: [1, 2], a: 1 }, { a: 2 }),
  // Payload integers stay exact (the sink refuses integers beyond 2^53: JSON would round them).
  // No own `__proto__` key: the app's JSON parser refuses such a body (400, bad-input.test's
  // prototype-poisoning case), which the model does not model; seen failing a rare seed.
  fc
    .jsonValue({ maxDepth: 2 })
    .filter((v) => !hasUnsafeInteger(v) && !JSON.stringify(v).includes('"__proto__"')) as fc.Arbitrary<JsonValue>,
);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('advance' as const), resource, token }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('batch' as const),
      items: fc.array(fc.record({ resource, token }), { minLength: 1, maxLength: 4 }),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      resource,
      token,
      resultId: fc.constantFrom('x', 'y', 'task:z/1'),
      payload,
    }),
  },
);
/** Commands, cut into groups fired concurrently (each group may become one or more batches). */
const program = fc.array(fc.array(cmd, { minLength: 1, maxLength: 8 }), { minLength: 1, maxLength: 8 });

function onModel(model: FencedStore, c: Cmd): (AdvanceDecision | WriteDecision)[] {
  switch (c.kind) {
    case 'advance':
      return [model.advance(c.resource, c.token)];
    case 'batch':
      return c.items.map((i) => model.advance(i.resource, i.token));
    case 'write':
      return [model.write(c.resource, c.token, c.resultId, c.payload)];
  }
}

async function onTarget(target: ContractTarget, c: Cmd): Promise<(AdvanceDecision | WriteDecision)[]> {
  switch (c.kind) {
    case 'advance':
      return [await target.advance(c.resource, c.token)];
    case 'batch':
      return target.advanceBatch(c.items);
    case 'write':
      return [await target.write({ ...c, workerId: 'w-1' })];
  }
}

async function check(open: () => Promise<ContractTarget>, groups: Cmd[][]): Promise<void> {
  const target = await open();
  try {
    const model = new FencedStore();
    for (const group of groups) {
      const expected = group.map((c) => onModel(model, c));
      const actual = await Promise.all(group.map((c) => onTarget(target, c)));
      expect(actual).toEqual(expected);
    }
    for (const r of ['r/1', 'r/2', 'r/3']) {
      const view = await target.resource(r);
      expect(view.fence).toBe(model.fenceOf(r));
      for (const stored of view.results) {
        expect(canonicalJson(stored.payload)).toBe(model.resultOf(r, stored.resultId)?.payload);
      }
      const modelCount = ['x', 'y', 'task:z/1'].filter((id) => model.resultOf(r, id) !== undefined).length;
      expect(view.results.length).toBe(modelCount);
    }
  } finally {
    await target.close();
  }
}

const openService = () => {
  const store = new SqliteFenceStore({ path: ':memory:' });
  const service = new FencedService({ store, logger: pino({ level: 'silent' }) });
  return Promise.resolve(
    serviceTarget(service, {
      close: async () => {
        await service.close();
        await store.close();
      },
    }),
  );
};

describe('sink vs the reference model (FencedStore)', () => {
  it('in-process service over SQLite gives the model answers', async () => {
    await fc.assert(
      fc.asyncProperty(program, (groups) => check(openService, groups)),
      { numRuns: 150 },
    );
  });

  it('HTTP app gives the model answers', async () => {
    await fc.assert(
      fc.asyncProperty(program, (groups) => check(injectTarget, groups)),
      { numRuns: 25 },
    );
  });
});
