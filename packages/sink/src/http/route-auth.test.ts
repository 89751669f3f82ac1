/**
 * The sink's auth comes from the route table: every route declares a credential, and no spelling
 * of a path reaches a handler without it. Raw HTTP over a real socket to the real app.
 */
import { rawJson } from '@leasehold/devkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sink } from '../sink.js';
import { COORDINATOR_KEY, READ_KEY, sign } from '../testing/fixtures.js';
import { openListeningSink } from '../testing/targets.js';
import { routeTable } from './route-auth.js';

let sink: Sink;
let cleanup: () => Promise<void>;
let port: number;

beforeAll(async () => {
  ({ sink, cleanup, port } = await openListeningSink());
});
afterAll(async () => {
  await cleanup();
});

const raw = (method: string, target: string, options: { key?: string; body?: unknown } = {}) =>
  rawJson(port, method, target, options);

const concrete = (url: string) => url.replace(':resource', 'r1').replace(':resultId', 'x1');

async function fenceOf(resource: string): Promise<string> {
  const answer = await raw('GET', `/v1/resources/${resource}`, { key: COORDINATOR_KEY });
  return (JSON.parse(answer.body) as { fence: string }).fence;
}

describe('route table', () => {
  it('every route declares a credential; bearer routes refuse a request without a key', async () => {
    const table = routeTable(sink.app);
    expect(table.length).toBeGreaterThan(6);
    for (const route of table) {
      expect(route.credential, `${route.method} ${route.url}`).toMatch(/^(none|coordinator|read|capability)$/);
    }
    for (const route of table.filter((r) => r.credential === 'coordinator' || r.credential === 'read')) {
      const answer = await raw(route.method, concrete(route.url), route.method === 'POST' ? { body: {} } : {});
      expect(answer.status, `${route.method} ${route.url}`).toBe(401);
    }
    const write = table.find((r) => r.credential === 'capability');
    expect(write?.url).toBe('/v1/writes');
    expect((await raw('POST', '/v1/writes', { body: { resource: 'r1' } })).status).toBe(401);
  });
});

describe('spellings of a path', () => {
  it('advances by any spelling need the coordinator key; nothing moves without it', async () => {
    const before = await fenceOf('r1');
    for (const target of [
      '/v1/fences/advance',
      '/%761/fences/advance',
      '/v%31/fences/advance',
      '//v1//fences/advance',
      '/V1/FENCES/ADVANCE',
      '/v1/./fences/advance',
      '/x/../v1/fences/advance',
      '/healthz/../v1/fences/advance',
    ]) {
      const answer = await raw('POST', target, { body: { resource: 'r1', token: '99' } });
      expect(answer.status, target).toBe(401);
      const readOnly = await raw('POST', target, { key: READ_KEY, body: { resource: 'r1', token: '99' } });
      expect(readOnly.status, target).toBe(403);
    }
    expect(await fenceOf('r1')).toBe(before);
  });

  it('reads by any spelling need a read key, and get the canonical answer with one', async () => {
    for (const target of ['/%761/resources/r1', '/v1/RESOURCES/r1', '//v1/resources/r1', '/v1/x/%2e%2e/resources/r1']) {
      expect((await raw('GET', target)).status, target).toBe(401);
      expect((await raw('GET', target, { key: READ_KEY })).status, target).toBe(200);
    }
  });

  it('a write by a variant path is the same write (capability checked), not a bypass', async () => {
    await raw('POST', '/v1/fences/advance', { key: COORDINATOR_KEY, body: { resource: 'r2', token: '5' } });
    const body = {
      resource: 'r2',
      token: '5',
      resultId: 'x',
      workerId: 'w',
      incarnation: 'inc-1',
      capability: sign('r2', 5n, 'w'),
      payload: { v: 1 },
    };
    expect((await raw('POST', '/%761/writes', { body: { ...body, capability: 'AAAA' } })).status).toBe(403);
    expect((await raw('POST', '//v1/writes', { body })).status).toBe(200);
  });

  it('open routes stay open, unknown routes are 404 and OPTIONS does nothing', async () => {
    expect((await raw('GET', '/%68ealthz')).status).toBe(200);
    expect((await raw('GET', '/metrics')).status).toBe(200);
    expect((await raw('GET', '/v1/nothing')).status).toBe(404);
    expect((await raw('OPTIONS', '/v1/fences/advance')).status).toBe(404);
    expect((await raw('HEAD', '/v1/decisions')).status).toBe(401);
  });
});
