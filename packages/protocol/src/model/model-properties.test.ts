/**
 * Model-based properties: random interleavings of acquires, retries, renews, releases, writes
 * (including stale and rogue ones), clock jumps, expiry sweeps and restarts, checked by
 * {@link runModel}'s invariants. The second half proves the checks can fail: each deliberately
 * broken rule is caught.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideAdvance, decideWrite } from './fence-rules.js';
import type { FenceRules } from './fenced-store.js';
import { LeaseTable, type LeaseTableOptions } from './lease-table.js';
import { runModel, type Action, type LeaseTableLike, type ModelRunOptions, type ViolationKind } from './model-run.js';

const TTL = 1_000;
const worker = fc.integer({ min: 0, max: 2 });
const resource = fc.integer({ min: 0, max: 3 });

const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('acquire' as const), worker, resource }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('retry-acquire' as const), worker }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('renew' as const), worker, resource }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), worker, resource }) },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      worker,
      resource,
      variant: fc.integer({ min: 0, max: 1 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('rogue-write' as const),
      resource,
      ahead: fc.integer({ min: 1, max: 5 }),
    }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      // Clock jumps, with the TTL boundary itself over-represented.
      ms: fc.oneof(fc.constantFrom(0, 1, TTL - 1, TTL, TTL + 1), fc.integer({ min: 0, max: 3 * TTL })),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ kind: 'expire' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'restart' as const }) },
);

const scenario = fc.record({ actions: fc.array(action, { minLength: 1, maxLength: 80 }), fenceOnExpiry: fc.boolean() });

function violationsOf(s: { actions: Action[]; fenceOnExpiry: boolean }, overrides: Partial<ModelRunOptions> = {}) {
  return runModel(s.actions, { ttlMs: TTL, fenceOnExpiry: s.fenceOnExpiry, ...overrides });
}

describe('model properties (random interleavings)', () => {
  it('hold every safety invariant', () => {
    fc.assert(
      fc.property(scenario, (s) => {
        expect(violationsOf(s)).toEqual([]);
      }),
      { numRuns: 1_500 },
    );
  });
});

/** Finds a counterexample for a broken variant and returns which invariants it broke. */
function brokenKinds(overrides: Partial<ModelRunOptions>): Set<ViolationKind> {
  const result = fc.check(
    fc.property(scenario, (s) => violationsOf(s, overrides).length === 0),
    { numRuns: 3_000, seed: 42 },
  );
  if (!result.failed || result.counterexample === null) return new Set();
  const [s] = result.counterexample;
  return new Set(violationsOf(s, overrides).map((v) => v.kind));
}

/** The broken variant produced at least one violation, and only of the kinds it can cause. */
function expectCaught(kinds: Set<ViolationKind>, expected: ViolationKind[]): void {
  expect(kinds.size).toBeGreaterThan(0);
  for (const kind of kinds) expect(expected).toContain(kind);
}

function rules(write: FenceRules['decideWrite'], advance: FenceRules['decideAdvance'] = decideAdvance): FenceRules {
  return { decideWrite: write, decideAdvance: advance };
}

describe('the properties catch broken rules', () => {
  it('accepting token >= fence lets an unissued (worker-supplied) token through', () => {
    const broken = rules((fence, token, existing, payload) =>
      token >= fence ? decideWrite(token, token, existing, payload) : decideWrite(fence, token, existing, payload),
    );
    expect(brokenKinds({ rules: broken })).toContain('unissued-token-accepted');
  });

  it('accepting token <= fence (no fencing) lets a stale write land after takeover', () => {
    const broken = rules((fence, token, existing, payload) =>
      token <= fence ? decideWrite(token, token, existing, payload) : decideWrite(fence, token, existing, payload),
    );
    const kinds = brokenKinds({ rules: broken });
    expect(kinds).toContain('stale-write-accepted');
  });

  it('overwriting a result on a different payload is caught', () => {
    const broken = rules((fence, token, _existing, payload) => decideWrite(fence, token, undefined, payload));
    expect(brokenKinds({ rules: broken })).toContain('result-changed');
  });

  it('renewing at the deadline (now <= deadline) is caught', () => {
    // The inner table's clock lags 1 ms during renew only: a renew exactly at the deadline passes.
    const makeTable = (o: LeaseTableOptions): LeaseTableLike => {
      let lagMs = 0;
      const inner = new LeaseTable({ ...o, clock: { nowMs: () => o.clock.nowMs() - lagMs } });
      return {
        acquire: (r) => inner.acquire(r),
        renew: (r) => {
          lagMs = 1;
          try {
            return inner.renew(r);
          } finally {
            lagMs = 0;
          }
        },
        release: (r) => inner.release(r),
        expire: () => inner.expire(),
      };
    };
    expectCaught(brokenKinds({ makeTable }), ['renew-after-deadline', 'two-live-owners']);
  });

  it('granting while a valid lease exists is caught', () => {
    const makeTable = (o: LeaseTableOptions): LeaseTableLike => {
      const inner = new LeaseTable(o);
      return {
        acquire: (r) => {
          const first = inner.acquire(r);
          if (first.ok || first.code !== 'LEASE_HELD') return first;
          // Throw the current holder out instead of refusing.
          const holder = inner.holderOf(r.resource);
          if (holder !== undefined) inner.release(holder);
          return inner.acquire(r);
        },
        renew: (r) => inner.renew(r),
        release: (r) => inner.release(r),
        expire: () => inner.expire(),
      };
    };
    expect(brokenKinds({ makeTable })).toContain('two-live-owners');
  });

  it('granting before advancing the fence is caught', () => {
    // The fence advance is deferred until the next acquire: the grant goes out first.
    const makeTable = (o: LeaseTableOptions): LeaseTableLike => {
      const pending: [string, bigint][] = [];
      const inner = new LeaseTable({
        ...o,
        fences: {
          fenceOf: (r) => o.fences.fenceOf(r),
          advance: (r, token) => {
            pending.push([r, token]);
            return { ok: true, outcome: 'advanced', fence: token };
          },
        },
      });
      return {
        acquire: (r) => {
          for (const [resource, token] of pending.splice(0)) o.fences.advance(resource, token);
          return inner.acquire(r);
        },
        renew: (r) => inner.renew(r),
        release: (r) => inner.release(r),
        expire: () => inner.expire(),
      };
    };
    expectCaught(brokenKinds({ makeTable }), [
      'stale-write-accepted',
      'foreign-fence-moved',
      'unissued-token-accepted',
    ]);
  });
});
