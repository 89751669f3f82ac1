/**
 * The admin HTTP surface's auth comes from the route table. These tests talk raw HTTP over a real
 * socket (so the exact bytes of the request line reach the server, as an attacker would send them)
 * to the real fastify server with a recording task service: a refused request must do no work.
 */
import { rawHttp, rawJson } from '@leasehold/devkit';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import Fastify from 'fastify';
import { installRouteAuth, routeTable } from './route-auth.js';
import { ADMIN_KEY, recordingTasks, startTestServer } from '../testing/http-fixture.js';

const calls: string[] = [];
let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  ({ app, port } = await startTestServer(recordingTasks(calls)));
});
afterAll(async () => {
  await app.close();
});
afterEach(() => {
  calls.length = 0;
});

function raw(method: string, target: string, options: { key?: string; body?: unknown } = {}) {
  return rawJson(port, method, target, options);
}

/** Path params filled so that the route's handler would do work if reached. */
function concrete(url: string): string {
  return url.replace(':taskId', 't1').replace(':resource', 'r1');
}

describe('route table', () => {
  it('every route declares a credential, and every non-open route refuses a request without one', async () => {
    const table = routeTable(app);
    expect(table.length).toBeGreaterThan(5);
    for (const route of table)
      expect(route.credential, `${route.method} ${route.url}`).toMatch(/^(none|admin|console)$/);
    for (const route of table.filter((r) => r.credential !== 'none')) {
      const body = route.method === 'POST' ? {} : undefined;
      const answer = await raw(route.method, concrete(route.url), body === undefined ? {} : { body });
      expect(answer.status, `${route.method} ${route.url}`).toBe(401);
      if (route.method !== 'HEAD') {
        expect(JSON.parse(answer.body)).toMatchObject({ type: 'error', code: 'UNAUTHENTICATED' });
      }
    }
    expect(calls).toEqual([]);
  });

  it('refuses to register a route that declares no (coordinator )?credential', async () => {
    const other = Fastify();
    installRouteAuth(other, { checks: { admin: () => true, console: () => true }, log: pino({ level: 'silent' }) });
    expect(() => other.get('/v1/new-thing', () => 'oops')).toThrow(/declares no (coordinator )?credential/);
    other.get('/v1/declared', { config: { credential: 'admin' } }, () => 'fine');
    await other.close();
  });
});

describe('percent-encoding and other spellings of a path', () => {
  // Each variant must get exactly the answer its canonical path gets: 401 without a key.
  const variants: [canonical: string, variants: string[]][] = [
    [
      '/v1/tasks',
      [
        '/%761/tasks',
        '/v%31/tasks',
        '/v1/%74asks',
        '/%76%31/%74%61%73%6b%73',
        '//v1/tasks',
        '/v1//tasks',
        '/v1/tasks/',
        '/./v1/tasks',
        '/v1/./tasks',
        '/x/../v1/tasks',
        '/v1/x/%2e%2e/tasks',
        '/V1/Tasks',
        '/V1/TASKS',
        '/v1/tasks?',
        '/v1/tasks#frag',
        '/v1/tasks?x=/healthz',
        '/v1/tasks;/healthz',
      ],
    ],
    ['/v1/tasks/t1', ['/%761/tasks/t1', '/v1/tasks//t1', '/v1/TASKS/t1', '/v1/./tasks/t1', '/healthz/../v1/tasks/t1']],
    ['/v1/resources/r1', ['/v%31/resources/r1', '/V1/RESOURCES/r1', '/v1/resources/./r1']],
  ];

  it.each(variants)('%s: every variant is refused without a key, and does no work', async (canonical, list) => {
    const expected = await raw('GET', canonical);
    expect(expected.status).toBe(401);
    for (const target of list) {
      const answer = await raw('GET', target);
      // Either the router resolves the variant to the same route (401) or to nothing (404).
      expect([401, 404], target).toContain(answer.status);
      if (answer.status === 404) expect(JSON.parse(answer.body), target).toMatchObject({ code: 'NOT_FOUND' });
    }
    expect(calls).toEqual([]);
  });

  it('percent-encoded, doubled-slash, dot-segment and case variants reach the canonical route', async () => {
    for (const target of ['/%761/tasks', '/v%31/tasks', '//v1/tasks', '/v1/./tasks', '/x/../v1/tasks', '/V1/Tasks']) {
      expect((await raw('GET', target)).status, target).toBe(401);
      expect((await raw('GET', target, { key: ADMIN_KEY })).status, target).toBe(200);
    }
    expect(calls).toEqual(Array(6).fill('list'));
  });

  it('refuses mutations by any spelling: submit and cancel without a key reach no handler', async () => {
    for (const target of ['/%761/tasks', '/v%31/tasks', '//v1//tasks', '/V1/TASKS']) {
      const answer = await raw('POST', target, { body: { taskId: 'evil', resource: 'r', payload: 1 } });
      expect(answer.status, target).toBe(401);
    }
    for (const target of ['/%761/tasks/t1', '/v1/tasks/%74%31', '/v1/x/../tasks/t1']) {
      expect((await raw('DELETE', target)).status, target).toBe(401);
    }
    expect(calls).toEqual([]);
  });

  it('keeps an encoded slash inside an id segment (ids may contain "/")', async () => {
    const answer = await raw('GET', '/v1/tasks/a%2Fb', { key: ADMIN_KEY });
    expect(answer.status).toBe(200);
    expect(calls).toEqual(['get a/b']);
  });

  it('answers HEAD like GET and OPTIONS like an unknown route, both without work', async () => {
    expect((await raw('HEAD', '/v1/tasks')).status).toBe(401);
    expect((await raw('HEAD', '/%761/tasks')).status).toBe(401);
    expect((await raw('OPTIONS', '/v1/tasks')).status).toBe(404);
    expect((await raw('HEAD', '/healthz')).status).toBe(200);
    expect(calls).toEqual([]);
  });

  it('keeps open routes open and unknown routes 404', async () => {
    expect((await raw('GET', '/healthz')).status).toBe(200);
    expect((await raw('GET', '/%68ealthz')).status).toBe(200);
    expect((await raw('GET', '/readyz')).status).toBe(200);
    expect((await raw('GET', '/metrics')).status).toBe(200);
    expect((await raw('GET', '/v1/nothing')).status).toBe(404);
    expect((await raw('GET', '/v1/nothing', { key: ADMIN_KEY })).status).toBe(404);
  });
});

describe('hostile JSON', () => {
  it('refuses a task payload nested past the limit, or with integers JSON would round, before any handler', async () => {
    const deep = `${'['.repeat(65)}${']'.repeat(65)}`;
    for (const payload of [deep, `${'{"a":'.repeat(3_000)}1${'}'.repeat(3_000)}`, '9007199254740993']) {
      const answer = await rawHttp(port, {
        method: 'POST',
        target: '/v1/tasks',
        headers: { Authorization: `Bearer ${ADMIN_KEY}`, 'Content-Type': 'application/json' },
        body: `{"taskId":"t-deep","resource":"r","payload":${payload}}`,
      });
      expect(answer.status).toBe(400);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'INVALID_MESSAGE' });
    }
    expect(calls).toEqual([]);
  });

  it('refuses 100k levels without a key as 401 (auth before the body is read)', async () => {
    const answer = await rawHttp(port, {
      method: 'POST',
      target: '/v1/tasks',
      headers: { 'Content-Type': 'application/json' },
      body: `${'['.repeat(100_000)}${']'.repeat(100_000)}`,
    });
    expect(answer.status).toBe(401);
    expect(calls).toEqual([]);
  });
});

describe('batch submit with Prefer: return=minimal', () => {
  const tasks = [
    { taskId: 'm1', resource: 'r1', payload: 1 },
    { taskId: 'm2', resource: 'r2', payload: 2 },
  ];
  const submit = (headers: Record<string, string>) =>
    rawHttp(port, {
      method: 'POST',
      target: '/v1/tasks/batch',
      headers: { Authorization: `Bearer ${ADMIN_KEY}`, 'Content-Type': 'application/json', ...headers },
      body: JSON.stringify({ tasks }),
    });

  it('answers each task with its id and status only, and says the preference was applied', async () => {
    const answer = await submit({ Prefer: 'return=minimal' });
    expect(answer.status).toBe(200);
    expect(answer.headers['preference-applied']).toBe('return=minimal');
    expect(JSON.parse(answer.body)).toEqual({
      results: [
        { taskId: 'm1', status: 201 },
        { taskId: 'm2', status: 201 },
      ],
    });
    expect(calls).toEqual(['submitMany 2']);
  });

  it('keeps the task views without the preference (or with another)', async () => {
    for (const headers of [{}, { Prefer: 'return=representation' }]) {
      const answer = await submit(headers);
      expect(answer.headers['preference-applied']).toBeUndefined();
      const body = JSON.parse(answer.body) as { results: { task?: { taskId: string } }[] };
      expect(body.results.map((r) => r.task?.taskId)).toEqual(['m1', 'm2']);
    }
  });
});
