/**
 * `POST /v1/writes/batch` through the HTTP app: each item is decided as `POST /v1/writes` would
 * decide it (its own capability, schema and fence checks; a refusal of one item leaves the others
 * alone), a body that is not a batch is refused as a whole with nothing decided, and every item's
 * `traceparent` is checked. The fence rules themselves are the contract's (`testing/contract.ts`).
 */
import { MAX_WRITE_BATCH_ITEMS } from '@leasehold/protocol';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Sink } from '../sink.js';
import { COORDINATOR_KEY, INCARNATION, sign } from '../testing/fixtures.js';
import { openInjectSink } from '../testing/targets.js';

const AUTH = { authorization: `Bearer ${COORDINATOR_KEY}` };

function item(resultId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    resource: 'r',
    token: '1',
    resultId,
    workerId: 'w',
    incarnation: INCARNATION,
    capability: sign('r', 1n, 'w'),
    payload: { id: resultId },
    ...overrides,
  };
}

describe('POST /v1/writes/batch', () => {
  let sink: Sink;
  let cleanup: () => Promise<void>;
  beforeEach(async () => {
    ({ sink, cleanup } = await openInjectSink({ bodyLimitBytes: 64 * 1024 }));
    const advanced = await sink.app.inject({
      method: 'POST',
      url: '/v1/fences/advance',
      payload: { resource: 'r', token: '1' },
      headers: AUTH,
    });
    expect(advanced.statusCode).toBe(200);
  });
  afterEach(async () => {
    await cleanup();
  });

  const batch = (payload: unknown) =>
    sink.app.inject({ method: 'POST', url: '/v1/writes/batch', payload: payload as object });
  const stored = async () =>
    (await sink.app.inject({ url: '/v1/resources/r', headers: AUTH })).json<{ results: { resultId: string }[] }>()
      .results;
  const metric = async (name: string) => {
    const text = (await sink.app.inject({ url: '/metrics' })).body;
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    return line === undefined ? undefined : Number(line.split(' ')[1]);
  };

  it('answers each item in order as POST /v1/writes would; a refused item leaves its neighbours written', async () => {
    const res = await batch({
      items: [
        item('a'),
        item('b', { capability: sign('r', 1n, 'other-worker') }),
        item('c', { capability: undefined }),
        item('d', { token: 'not-a-token' }),
        item('e', { token: '2', capability: sign('r', 2n, 'w') }),
        item('f', { capability: 'v2.k9.AAAA' }),
        item('a'),
        item('a', { payload: { other: true } }),
        item('g'),
      ],
    });
    expect(res.statusCode).toBe(200);
    const results = res.json<{ results: Record<string, unknown>[] }>().results;
    expect(results.map((r) => (r.ok === true ? r.outcome : r.code))).toEqual([
      'written',
      'FORBIDDEN',
      'UNAUTHENTICATED',
      'INVALID_MESSAGE',
      'FENCE_CONFLICT',
      'FORBIDDEN',
      'replayed',
      'RESULT_CONFLICT',
      'written',
    ]);
    expect(results[0]).toEqual({ ok: true, resource: 'r', resultId: 'a', outcome: 'written', fence: '1' });
    expect(results[1]).toEqual({
      ok: false,
      code: 'FORBIDDEN',
      message: 'capability does not match (resource, token, workerId, incarnation)',
      retryable: false,
    });
    expect(results[4]).toMatchObject({ ok: false, code: 'FENCE_CONFLICT', fence: '1', retryable: false });
    expect(results[7]).toMatchObject({ ok: false, code: 'RESULT_CONFLICT', fence: '1' });
    expect((await stored()).map((r) => r.resultId)).toEqual(['a', 'g']);
    expect(await metric('leasehold_sink_write_batch_items_sum')).toBe(9);
    expect(await metric('leasehold_sink_writes_total{outcome="forbidden"}')).toBe(2);
  });

  it('refuses a body that is not a batch as a whole, deciding nothing (400 INVALID_MESSAGE)', async () => {
    const bodies: [string, unknown][] = [
      ['an array', [item('a')]],
      ['no items', {}],
      ['items not an array', { items: item('a') }],
      ['no item', { items: [] }],
      ['too many items', { items: Array.from({ length: MAX_WRITE_BATCH_ITEMS + 1 }, (_, i) => item(`x${i}`)) }],
      ['another key', { items: [item('a')], also: 1 }],
    ];
    for (const [name, body] of bodies) {
      const res = await batch(body);
      expect(res.statusCode, name).toBe(400);
      expect(res.json(), name).toMatchObject({ type: 'error', code: 'INVALID_MESSAGE', retryable: false });
    }
    expect(await stored()).toEqual([]);
  });

  it('takes MAX_WRITE_BATCH_ITEMS items; a body over the limit is 413 with nothing decided', async () => {
    const full = await batch({ items: Array.from({ length: MAX_WRITE_BATCH_ITEMS }, (_, i) => item(`x${i}`)) });
    expect(full.statusCode).toBe(200);
    expect(full.json<{ results: { ok: boolean }[] }>().results.every((r) => r.ok)).toBe(true);
    const big = 'x'.repeat(40 * 1024);
    const tooLarge = await batch({ items: [item('big-1', { payload: big }), item('big-2', { payload: big })] });
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json()).toMatchObject({ code: 'PAYLOAD_TOO_LARGE' });
    expect((await stored()).filter((r) => r.resultId.startsWith('big'))).toEqual([]);
  });

  it('an item that is not an object is refused alone (INVALID_MESSAGE)', async () => {
    const res = await batch({ items: [null, 7, [item('x')], 'w', item('b')] });
    expect(res.statusCode).toBe(200);
    const results = res.json<{ results: Record<string, unknown>[] }>().results;
    expect(results.map((r) => (r.ok === true ? r.outcome : r.code))).toEqual([
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'INVALID_MESSAGE',
      'written',
    ]);
    expect((await stored()).map((r) => r.resultId)).toEqual(['b']);
  });

  it('an item with a traceparent that is not a string is refused alone', async () => {
    const res = await batch({
      items: [
        item('a', { traceparent: 7 }),
        item('b', { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }),
      ],
    });
    const results = res.json<{ results: Record<string, unknown>[] }>().results;
    expect(results.map((r) => (r.ok === true ? r.outcome : r.code))).toEqual(['INVALID_MESSAGE', 'written']);
    expect((await stored()).map((r) => r.resultId)).toEqual(['b']);
  });
});
