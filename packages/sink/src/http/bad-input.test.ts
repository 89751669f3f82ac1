/**
 * Every class of bad input gets its status and code, and changes nothing: the fence, the results
 * and the decision log are exactly as before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sink } from '../sink.js';
import { COORDINATOR_KEY, INCARNATION, sign } from '../testing/fixtures.js';
import { openInjectSink } from '../testing/targets.js';

const AUTH = { authorization: `Bearer ${COORDINATOR_KEY}` };
const JSON_TYPE = { 'content-type': 'application/json' };

let sink: Sink;
let cleanup: () => Promise<void>;

beforeAll(async () => {
  ({ sink, cleanup } = await openInjectSink({ bodyLimitBytes: 40_000 }));
  const advance = await sink.app.inject({
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    payload: { resource: 'res', token: '5' },
  });
  expect(advance.statusCode).toBe(200);
  const write = await sink.app.inject({ method: 'POST', url: '/v1/writes', payload: goodWrite() });
  expect(write.statusCode).toBe(200);
});

afterAll(async () => {
  await cleanup();
});

function goodWrite(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    resource: 'res',
    token: '5',
    resultId: 'r-1',
    workerId: 'w-1',
    incarnation: INCARNATION,
    capability: sign('res', 5n, 'w-1'),
    payload: { v: 1 },
    ...overrides,
  };
}

async function snapshot(): Promise<unknown> {
  const view = await sink.app.inject({ url: '/v1/resources/res', headers: AUTH });
  const decisions = await sink.app.inject({ url: '/v1/decisions?limit=1000', headers: AUTH });
  return { view: view.json<unknown>(), decisions: decisions.json<{ decisions: unknown[] }>().decisions.length };
}

interface Case {
  readonly name: string;
  readonly method?: 'GET' | 'POST' | 'DELETE' | 'PUT';
  readonly url: string;
  readonly headers?: Record<string, string>;
  /** Raw string bodies are sent as-is; objects as JSON. */
  readonly body?: string | Record<string, unknown>;
  readonly status: number;
  readonly code: string;
}

const TOKENS_BAD = ['0', '-1', '01', '1.5', '5e3', ' 5', '', '9223372036854775808', '99999999999999999999', '0x10'];
const IDS_BAD = [' ', 'has space', '/leading', 'a//b', 'a/../b', 'x'.repeat(201), 'tab\t', 'é', ''];

const cases: Case[] = [
  // Malformed JSON and wrong content.
  {
    name: 'malformed JSON (advance)',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: { ...AUTH, ...JSON_TYPE },
    body: '{"resource":',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'malformed JSON (write)',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: '{nope}',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'empty JSON body',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: '',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'non-JSON content type',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: { ...AUTH, 'content-type': 'text/plain' },
    body: 'resource=res',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'prototype poisoning',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: '{"__proto__":{"x":1},"resource":"res"}',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'JSON array body (write)',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: '[1,2]',
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  // Wrong types and shapes.
  {
    name: 'token as a JSON number',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: 'res', token: 6 },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'resource as a number',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: 7, token: '6' },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'unknown field (advance)',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: 'res', token: '6', force: true },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'missing token',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: 'res' },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'batch with no items',
    method: 'POST',
    url: '/v1/fences/advance-batch',
    headers: AUTH,
    body: { items: [] },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'batch over 1000 items',
    method: 'POST',
    url: '/v1/fences/advance-batch',
    headers: AUTH,
    body: { items: Array.from({ length: 1001 }, () => ({ resource: 'res', token: '9' })) },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'batch with one bad item applies none',
    method: 'POST',
    url: '/v1/fences/advance-batch',
    headers: AUTH,
    body: {
      items: [
        { resource: 'res', token: '9' },
        { resource: 'res', token: '-1' },
      ],
    },
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'write with unknown field',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', extra: 1 }),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'write with token as number',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', token: 5 }),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'write with missing payload',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', payload: undefined }),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  // Tokens that are not positive decimal integers <= int64 max.
  ...TOKENS_BAD.map((token): Case => ({
    name: `advance token ${JSON.stringify(token)}`,
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: 'res', token },
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  ...TOKENS_BAD.map((token): Case => ({
    name: `write token ${JSON.stringify(token)}`,
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', token }),
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  // Ids outside the charset or length.
  ...IDS_BAD.map((id): Case => ({
    name: `advance resource ${JSON.stringify(id.slice(0, 12))}`,
    method: 'POST',
    url: '/v1/fences/advance',
    headers: AUTH,
    body: { resource: id, token: '6' },
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  ...IDS_BAD.map((id): Case => ({
    name: `write resultId ${JSON.stringify(id.slice(0, 12))}`,
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: id }),
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  ...IDS_BAD.map((id): Case => ({
    name: `write workerId ${JSON.stringify(id.slice(0, 12))}`,
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', workerId: id }),
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  {
    name: 'write incarnation with a slash',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', incarnation: 'a/b' }),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'GET bad resource id',
    url: `/v1/resources/${encodeURIComponent('/bad')}`,
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'GET over-long resource id',
    url: `/v1/resources/${'x'.repeat(201)}`,
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'GET bad percent-encoding',
    url: '/v1/resources/%E0%A4%A',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'GET bad result id',
    url: '/v1/resources/res/results/a%20b',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  // Decision log query.
  { name: 'decisions after=-1', url: '/v1/decisions?after=-1', headers: AUTH, status: 400, code: 'INVALID_MESSAGE' },
  { name: 'decisions limit=0', url: '/v1/decisions?limit=0', headers: AUTH, status: 400, code: 'INVALID_MESSAGE' },
  {
    name: 'decisions limit=1001',
    url: '/v1/decisions?limit=1001',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  { name: 'decisions limit=abc', url: '/v1/decisions?limit=abc', headers: AUTH, status: 400, code: 'INVALID_MESSAGE' },
  {
    name: 'decisions unknown parameter',
    url: '/v1/decisions?from=3',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'decisions repeated parameter',
    url: '/v1/decisions?after=1&after=2',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  ...['abc', '-1', '01', '1.5', '', '9223372036854775808', '0x10'].map((after): Case => ({
    name: `resource page after=${JSON.stringify(after)}`,
    url: `/v1/resources/res?after=${encodeURIComponent(after)}`,
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  ...['-1', '1001', '1.5', 'abc', '', '0010'].map((limit): Case => ({
    name: `resource page limit=${JSON.stringify(limit)}`,
    url: `/v1/resources/res?limit=${encodeURIComponent(limit)}`,
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  })),
  {
    name: 'resource page unknown parameter',
    url: '/v1/resources/res?cursor=1',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'resource page repeated parameter',
    url: '/v1/resources/res?after=0&after=1',
    headers: AUTH,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  // Too large.
  {
    name: 'write body over the limit',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', payload: 'x'.repeat(50_000) }),
    status: 413,
    code: 'PAYLOAD_TOO_LARGE',
  },
  {
    name: 'advance body over the limit',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: { ...AUTH, ...JSON_TYPE },
    body: `{"resource":"res","token":"6","pad":"${'x'.repeat(50_000)}"}`,
    status: 413,
    code: 'PAYLOAD_TOO_LARGE',
  },
  // Unknown routes and methods.
  { name: 'unknown route', url: '/v2/anything', status: 404, code: 'NOT_FOUND' },
  {
    name: 'unknown route under /v1',
    method: 'POST',
    url: '/v1/fences',
    headers: AUTH,
    body: {},
    status: 404,
    code: 'NOT_FOUND',
  },
  { name: 'wrong method', method: 'DELETE', url: '/v1/writes', status: 404, code: 'NOT_FOUND' },
  { name: 'GET on a POST route', url: '/v1/fences/advance', headers: AUTH, status: 404, code: 'NOT_FOUND' },
  {
    name: 'unencoded slash in a resource path',
    url: '/v1/resources/a/b',
    headers: AUTH,
    status: 404,
    code: 'NOT_FOUND',
  },
  // Missing or wrong auth.
  {
    name: 'advance without a key',
    method: 'POST',
    url: '/v1/fences/advance',
    body: { resource: 'res', token: '6' },
    status: 401,
    code: 'UNAUTHENTICATED',
  },
  {
    name: 'advance with a wrong key',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: { authorization: 'Bearer wrong-key-wrong-key-wrong' },
    body: { resource: 'res', token: '6' },
    status: 401,
    code: 'UNAUTHENTICATED',
  },
  {
    name: 'advance-batch without a key',
    method: 'POST',
    url: '/v1/fences/advance-batch',
    body: { items: [{ resource: 'res', token: '6' }] },
    status: 401,
    code: 'UNAUTHENTICATED',
  },
  { name: 'read without a key', url: '/v1/resources/res', status: 401, code: 'UNAUTHENTICATED' },
  { name: 'result read without a key', url: '/v1/resources/res/results/r-1', status: 401, code: 'UNAUTHENTICATED' },
  { name: 'decisions without a key', url: '/v1/decisions', status: 401, code: 'UNAUTHENTICATED' },
  {
    name: 'write without a capability',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', capability: undefined }),
    status: 401,
    code: 'UNAUTHENTICATED',
  },
  {
    name: 'write with a wrong capability',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', capability: sign('res', 5n, 'someone-else') }),
    status: 403,
    code: 'FORBIDDEN',
  },
  // Hostile JSON: refused on the raw text before any recursive code (nothing is stored that could
  // not be read back), also without any credential.
  {
    name: 'write payload nested 65 levels (limit 64)',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: JSON.stringify(goodWrite({ resultId: 'r-deep' })).replace('{"v":1}', `${'['.repeat(64)}1${']'.repeat(64)}`),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'write payload nested 3000 levels, no capability',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: `{"payload":${'['.repeat(3000)}${']'.repeat(3000)}}`,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'body nested 10000 levels, unauthenticated advance (refused before the body is read)',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: JSON_TYPE,
    body: `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`,
    status: 401,
    code: 'UNAUTHENTICATED',
  },
  {
    name: 'body nested 15000 levels, authenticated advance',
    method: 'POST',
    url: '/v1/fences/advance',
    headers: { ...AUTH, ...JSON_TYPE },
    body: `${'['.repeat(15_000)}${']'.repeat(15_000)}`,
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'payload integer beyond 2^53 (JSON would round it)',
    method: 'POST',
    url: '/v1/writes',
    headers: JSON_TYPE,
    body: JSON.stringify(goodWrite({ resultId: 'r-big' })).replace('{"v":1}', '{"v":9007199254740993}'),
    status: 400,
    code: 'INVALID_MESSAGE',
  },
  {
    name: 'write with a capability that only a lenient decoder accepts',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-3', capability: `${sign('res', 5n, 'w-1')}=` }),
    status: 403,
    code: 'FORBIDDEN',
  },
  {
    name: 'write with a malformed capability',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ resultId: 'r-2', capability: 'garbage' }),
    status: 403,
    code: 'FORBIDDEN',
  },
  {
    name: 'conflicting write with a wrong capability',
    method: 'POST',
    url: '/v1/writes',
    body: goodWrite({ payload: 'other', capability: sign('res', 6n, 'w-1') }),
    status: 403,
    code: 'FORBIDDEN',
  },
];

describe('bad input is refused with a code and changes nothing', () => {
  it.each(cases)('$name -> $status $code', async (c) => {
    const before = await snapshot();
    const raw = typeof c.body === 'string';
    const res = await sink.app.inject({
      method: c.method ?? 'GET',
      url: c.url,
      headers: c.headers ?? {},
      ...(c.body === undefined ? {} : raw ? { payload: c.body } : { payload: c.body }),
    });
    expect({ status: res.statusCode, body: res.json<unknown>() }).toEqual({
      status: c.status,
      body: { type: 'error', code: c.code, message: expect.any(String) as string, retryable: false },
    });
    expect(await snapshot()).toEqual(before);
  });

  it('the baseline state is what the setup wrote', async () => {
    expect(await snapshot()).toMatchObject({ view: { fence: '5', results: [{ resultId: 'r-1' }] }, decisions: 2 });
  });
});
