/**
 * `checkWriteHead` must accept only bodies the full schema accepts (it is a shortcut, never a
 * wider door), and should accept the ordinary valid ones. Checked against `WriteRequestSchema`
 * with tables of bad values and with generated bodies.
 */
import { WriteRequestSchema } from '@leasehold/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkWriteHead } from './write-body.js';

const GOOD = {
  resource: 'tenant/a:b@c-d_e.f',
  token: '42',
  resultId: 'result-1',
  workerId: 'worker-1',
  incarnation: 'inc-1',
  capability: 'v1.k.abc',
  payload: { v: 1 },
};

/** The fast check may say "don't know" (undefined); when it says yes, zod must agree. */
function expectSubset(body: Record<string, unknown>): void {
  const fast = checkWriteHead(body);
  if (fast === undefined) return;
  const full = WriteRequestSchema.safeParse(body);
  expect(full.success, JSON.stringify(body)).toBe(true);
  if (full.success) expect({ ...fast }).toEqual({ ...full.data });
}

const BAD_IDS = [' ', 'has space', '/leading', 'a//b', 'a/../b', 'a..b', 'x'.repeat(201), 'tab\t', 'é', '', 'nl\n'];
const BAD_TOKENS = ['0', '-1', '01', '1.5', '5e3', ' 5', '', '9223372036854775808', '99999999999999999999', '0x10'];
const BAD_INCARNATIONS = ['', 'a/b', 'x'.repeat(65), 'sp ace', 'é'];
const NOT_STRINGS = [undefined, null, 5, true, ['a'], { a: 1 }];

describe('checkWriteHead', () => {
  it('accepts an ordinary valid body, like the schema', () => {
    expect(checkWriteHead(GOOD)).toEqual(GOOD);
    expect(WriteRequestSchema.safeParse(GOOD).success).toBe(true);
  });

  it('accepts the boundaries the schema accepts', () => {
    const edge = {
      ...GOOD,
      resource: 'x'.repeat(200),
      token: '9223372036854775807',
      incarnation: 'i'.repeat(64),
      capability: 'c'.repeat(512),
    };
    expect(checkWriteHead(edge)).toBeDefined();
    expectSubset(edge);
  });

  it.each(['resource', 'resultId', 'workerId'])('refuses bad ids in %s', (field) => {
    for (const value of [...BAD_IDS, ...NOT_STRINGS]) {
      expect(checkWriteHead({ ...GOOD, [field]: value })).toBeUndefined();
    }
  });

  it('refuses bad tokens, incarnations and capabilities', () => {
    for (const token of [...BAD_TOKENS, ...NOT_STRINGS]) expect(checkWriteHead({ ...GOOD, token })).toBeUndefined();
    for (const incarnation of [...BAD_INCARNATIONS, ...NOT_STRINGS]) {
      expect(checkWriteHead({ ...GOOD, incarnation })).toBeUndefined();
    }
    for (const capability of ['', 'c'.repeat(513), ...NOT_STRINGS]) {
      expect(checkWriteHead({ ...GOOD, capability })).toBeUndefined();
    }
  });

  it('refuses missing and unknown keys', () => {
    for (const key of Object.keys(GOOD)) {
      const body = Object.fromEntries(Object.entries(GOOD).filter(([k]) => k !== key));
      expect(checkWriteHead(body)).toBeUndefined();
      expect(checkWriteHead({ ...body, extra: 1 })).toBeUndefined();
    }
    expect(checkWriteHead({ ...GOOD, extra: 1 })).toBeUndefined();
  });

  it('never accepts what the schema refuses (generated bodies)', () => {
    const near = fc.constantFrom(
      ...BAD_IDS,
      ...BAD_TOKENS,
      ...BAD_INCARNATIONS,
      ...NOT_STRINGS,
      '1',
      '9223372036854775807',
    );
    const id = fc.oneof(
      { weight: 12, arbitrary: fc.stringMatching(/^[A-Za-z0-9_-]{1,12}$/) },
      { weight: 4, arbitrary: fc.stringMatching(/^[A-Za-z0-9._:/@-]{1,12}$/) },
      { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
      { weight: 1, arbitrary: near },
    );
    const token = fc.oneof(
      { weight: 4, arbitrary: fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String) },
      { weight: 1, arbitrary: fc.string({ maxLength: 20 }) },
      { weight: 1, arbitrary: near },
    );
    const body = fc.record(
      {
        resource: id,
        token,
        resultId: id,
        workerId: id,
        incarnation: id,
        capability: fc.oneof(fc.string({ maxLength: 600 }), near),
        // A body with a `__proto__` key never gets here: the app's JSON parser refuses it (400,
        // protoAction 'error'); zod would rebuild it with another prototype and fail the comparison.
        payload: fc.jsonValue().filter((v) => !JSON.stringify(v).includes('"__proto__"')),
        extra: fc.integer(),
      },
      { requiredKeys: ['resource', 'token', 'resultId', 'workerId', 'incarnation', 'capability', 'payload'] },
    );
    let accepted = 0;
    fc.assert(
      fc.property(body, (b) => {
        if (checkWriteHead(b) !== undefined) accepted++;
        expectSubset(b);
      }),
      { numRuns: 3000 },
    );
    // Enough bodies got through for the property to say something. Over 60 seeds 52–98 of 3,000 did
    // (mean ~75): the bar of 50 failed one CI run in a few hundred (49), so it is 20 now.
    expect(accepted).toBeGreaterThan(20);
  });
});
