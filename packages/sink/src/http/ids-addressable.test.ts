/**
 * One rule for ids and paths, at the sink (ids.ts in @leasehold/protocol): every resource and result
 * id the protocol accepts is addressable. A property over generated ids advances the fence and
 * writes a result under them (ids in the JSON body), then reads both back by the paths
 * @leasehold/sink-client builds, through the real fastify app (`inject`: router, path
 * normalisation and route auth all run), and checks the handler answered for the same ids.
 *
 * `.` and `..` (dot segments, also as `%2E`) are refused wherever an id is read, with
 * INVALID_MESSAGE. Drop the `(?!\.$)` of ID_PATTERN and the property finds `.` (the advance
 * accepts it; `GET /v1/resources/.` cannot reach it), and the refusal table fails.
 */
import { isValidId } from '@leasehold/protocol';
import { sinkResourcePath, sinkResultPath } from '@leasehold/sink-client';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sink } from '../sink.js';
import { COORDINATOR_KEY, INCARNATION, READ_KEY, sign } from '../testing/fixtures.js';
import { openInjectSink } from '../testing/targets.js';

let sink: Sink;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ sink, cleanup } = await openInjectSink());
});
afterAll(async () => {
  await cleanup();
});

const coordinator = { authorization: `Bearer ${COORDINATOR_KEY}` };
const reader = { authorization: `Bearer ${READ_KEY}` };

const ID_CHARS = ['A', 'Z', 'a', 'z', '0', '9', '.', '_', ':', '/', '@', '-'];
const idArbitrary = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom(...ID_CHARS), minLength: 1, maxLength: 200 }) },
  { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom('.', '/', 'a', ':'), minLength: 1, maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom('.', '..', '.a', 'a.', 'a/.', './a', 'a/./b', 'results', 'RESULTS', ':resource'),
  },
);

let nextToken = 1n;

describe('every accepted id is addressable through the real router', () => {
  it('a result written under (resource, resultId) reads back at the paths the client builds', async () => {
    await fc.assert(
      fc.asyncProperty(idArbitrary, idArbitrary, async (resource, resultId) => {
        fc.pre(isValidId(resource) && isValidId(resultId));
        const token = nextToken++;
        const advance = await sink.app.inject({
          method: 'POST',
          url: '/v1/fences/advance',
          headers: coordinator,
          payload: { resource, token: String(token) },
        });
        expect(advance.statusCode, advance.body).toBe(200);
        const write = await sink.app.inject({
          method: 'POST',
          url: '/v1/writes',
          payload: {
            resource,
            token: String(token),
            resultId,
            workerId: 'w1',
            incarnation: INCARNATION,
            capability: sign(resource, token, 'w1'),
            payload: { n: 1 },
          },
        });
        expect(write.statusCode, write.body).toBe(200);

        const view = await sink.app.inject({ method: 'GET', url: sinkResourcePath(resource), headers: reader });
        expect(view.statusCode, `GET ${sinkResourcePath(resource)}`).toBe(200);
        expect(view.json()).toMatchObject({ resource, fence: String(token) });
        const result = await sink.app.inject({
          method: 'GET',
          url: sinkResultPath(resource, resultId),
          headers: reader,
        });
        expect(result.statusCode, `GET ${sinkResultPath(resource, resultId)}`).toBe(200);
        // (The token is the first write's: a generated pair may repeat, and a repeat is a replay.)
        expect(result.json()).toMatchObject({ resource, resultId });
      }),
      { numRuns: 150 },
    );
  });
});

describe('ids no path can address are refused where an id is read', () => {
  it.each(['.', '..', 'a/..', '/a', 'a//b'])('%s: 400 INVALID_MESSAGE on an advance and on a write', async (id) => {
    const advance = await sink.app.inject({
      method: 'POST',
      url: '/v1/fences/advance',
      headers: coordinator,
      payload: { resource: id, token: '1' },
    });
    expect(advance.statusCode).toBe(400);
    expect(advance.json()).toMatchObject({ code: 'INVALID_MESSAGE' });
    const write = await sink.app.inject({
      method: 'POST',
      url: '/v1/writes',
      payload: {
        resource: 'r-ok',
        token: '1',
        resultId: id,
        workerId: 'w1',
        incarnation: INCARNATION,
        capability: sign('r-ok', 1n, 'w1'),
        payload: {},
      },
    });
    expect(write.statusCode).toBe(400);
    expect(write.json()).toMatchObject({ code: 'INVALID_MESSAGE' });
  });
});
