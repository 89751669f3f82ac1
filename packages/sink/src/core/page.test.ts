import { INT64_MAX, type Decision, type ResourceView, type StoredResult } from '@leasehold/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  DECISION_PAGE_ENVELOPE_BYTES,
  RESULT_PAGE_ENVELOPE_BYTES,
  decisionJsonBytes,
  pageLength,
  resultJsonBytes,
} from './page.js';

const KIB = 1024;

describe('pageLength', () => {
  const cases: [number[], number, number, number, string][] = [
    // sizes, limit, maxBytes, taken, why
    [[], 10, 100, 0, 'nothing to take'],
    [[10, 10, 10], 0, 100, 0, 'limit 0: the envelope alone'],
    [[10, 10, 10], 2, 100, 2, 'the count bound'],
    [[10, 10, 10], 10, 100, 3, 'everything fits'],
    [[40, 40, 40], 10, 100, 2, 'the byte bound: a third would pass 100'],
    [[40, 60, 1], 10, 100, 2, 'exactly at the budget is inside it'],
    [[500, 1], 10, 100, 1, 'a first entry over the budget comes alone'],
    [[10, 500, 1], 10, 100, 1, 'an entry over the budget after others waits for the next page'],
    [[500], 0, 100, 0, 'limit 0 beats "the first always comes"'],
  ];
  it.each(cases)('%j limit %i, %i bytes → %i (%s)', (sizes, limit, maxBytes, taken) => {
    expect(pageLength(sizes, { limit, maxBytes })).toBe(taken);
  });

  it('takes the longest prefix within both bounds, and at least one entry when allowed', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 5000 }), { maxLength: 40 }),
        fc.integer({ min: 0, max: 50 }),
        fc.integer({ min: 0, max: 20_000 }),
        (sizes, limit, maxBytes) => {
          const n = pageLength(sizes, { limit, maxBytes });
          const sum = (k: number) => sizes.slice(0, k).reduce((a, b) => a + b, 0);
          expect(n).toBeLessThanOrEqual(Math.min(limit, sizes.length));
          if (n > 1) expect(sum(n)).toBeLessThanOrEqual(maxBytes);
          if (limit > 0 && sizes.length > 0) expect(n).toBeGreaterThanOrEqual(1);
          // Maximal: one more would break a bound.
          if (n < Math.min(limit, sizes.length) && n > 0) expect(sum(n + 1)).toBeGreaterThan(maxBytes);
        },
      ),
    );
  });
});

// Identifiers as the protocol allows them (ids.ts), at any length up to the 200 maximum.
const id = fc.stringMatching(/^[A-Za-z0-9._:@-][A-Za-z0-9._:/@-]{0,199}$/);
const widest = fc.constantFrom(INT64_MAX.toString(), '1', '0');

describe('the size bounds are upper bounds of what the route sends', () => {
  it('a stored result is at most resultJsonBytes(ids, payload) bytes of JSON', () => {
    fc.assert(
      fc.property(id, id, id, fc.jsonValue(), widest, (resource, resultId, workerId, payload, token) => {
        const result: StoredResult = {
          resource,
          resultId,
          token: token === '0' ? '1' : token,
          workerId,
          payload: JSON.parse(JSON.stringify(payload)) as StoredResult['payload'],
          writtenAtMs: Number.MAX_SAFE_INTEGER,
        };
        const payloadBytes = Buffer.byteLength(JSON.stringify(result.payload));
        const ids = resource.length + resultId.length + workerId.length;
        // As one element of the results array: its bytes plus the separating comma.
        expect(Buffer.byteLength(JSON.stringify(result)) + 1).toBeLessThanOrEqual(resultJsonBytes(ids, payloadBytes));
      }),
    );
  });

  it('a page envelope and a decision are within their constants', () => {
    fc.assert(
      fc.property(id, id, id, widest, widest, (resource, resultId, workerId, a, b) => {
        const envelope: ResourceView = { resource, fence: a, results: [], next: b, hasMore: false };
        expect(Buffer.byteLength(JSON.stringify(envelope))).toBeLessThanOrEqual(RESULT_PAGE_ENVELOPE_BYTES);
        const decision: Decision = {
          seq: Number.MAX_SAFE_INTEGER,
          kind: 'advance',
          resource,
          token: a === '0' ? '1' : a,
          fenceBefore: b,
          outcome: 'RESULT_CONFLICT',
          resultId,
          workerId,
          atMs: Number.MAX_SAFE_INTEGER,
        };
        const ids = resource.length + resultId.length + workerId.length;
        expect(Buffer.byteLength(JSON.stringify(decision)) + 1).toBeLessThanOrEqual(decisionJsonBytes(ids));
        const page = { decisions: [], next: Number.MAX_SAFE_INTEGER, oldestRetained: Number.MAX_SAFE_INTEGER };
        expect(Buffer.byteLength(JSON.stringify(page))).toBeLessThanOrEqual(DECISION_PAGE_ENVELOPE_BYTES);
      }),
    );
  });

  it('a 1 MiB payload counts as about 1 MiB', () => {
    expect(resultJsonBytes(30, KIB * KIB)).toBeLessThan(KIB * KIB + KIB);
  });
});
