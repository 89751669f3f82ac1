/**
 * One rule for ids and paths (ids.ts in @leasehold/protocol): every id the protocol accepts is
 * addressable. A property over generated ids — biased to dots, slashes, the characters clients
 * percent-encode, and the names of static routes — builds each path exactly as @leasehold/client
 * (and the console page) builds it, sends it to the real fastify app (`inject`: the router, the
 * path normalisation and the route auth all run) and checks that the handler saw the same id.
 *
 * The ids no path can address (`.` and `..`: dot segments, also when sent as `%2E`) are refused at
 * submit with INVALID_MESSAGE. Drop the `(?!\.$)` of ID_PATTERN and the property finds `.`
 * (accepted, but answered 400 at `/v1/tasks/.`), and the submit table below fails.
 */
import { resourceOwnerPath, taskPath, taskRetryPath } from '@leasehold/client';
import { isValidId } from '@leasehold/protocol';
import fc from 'fast-check';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ADMIN_KEY, recordingTasks, startTestServer } from '../testing/http-fixture.js';

const auth = { authorization: `Bearer ${ADMIN_KEY}` };
/** What each handler was called with, in order. */
const seen: string[] = [];
let app: FastifyInstance;

beforeAll(async () => {
  ({ app } = await startTestServer(recordingTasks(seen), { listen: false }));
});
afterAll(async () => {
  await app.close();
});

const ID_CHARS = ['A', 'Z', 'a', 'z', '0', '9', '.', '_', ':', '/', '@', '-'];
/** Ids as the schema sees them: mostly valid, often at the edges of the rule. */
const idArbitrary = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom(...ID_CHARS), minLength: 1, maxLength: 200 }) },
  { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom('.', '/', 'a', '%', ':'), minLength: 1, maxLength: 8 }) },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '.',
      '..',
      '.a',
      'a.',
      'a/.',
      './a',
      'a/./b',
      '...',
      'batch',
      'BATCH',
      'purge',
      'Purge',
      'retry',
      ':taskId',
      '@',
      '-',
      'x'.repeat(200),
      ':'.repeat(200),
    ),
  },
);

/** The console page's paths (ui/app.ts builds them with encodeURIComponent, like the client). */
const consoleAction = (taskId: string, action: 'cancel' | 'retry') =>
  `/ui/api/tasks/${encodeURIComponent(taskId)}/${action}`;

async function call(method: 'GET' | 'DELETE' | 'POST', url: string, headers: Record<string, string> = auth) {
  seen.length = 0;
  const res = await app.inject({ method, url, headers });
  return { status: res.statusCode, seen: [...seen] };
}

describe('every accepted id is addressable through the real router', () => {
  it('tasks and resources: GET, DELETE, retry, the resource view and the console actions', async () => {
    await fc.assert(
      fc.asyncProperty(idArbitrary, async (id) => {
        fc.pre(isValidId(id));
        expect(await call('GET', taskPath(id)), `GET ${taskPath(id)}`).toEqual({ status: 200, seen: [`get ${id}`] });
        expect(await call('DELETE', taskPath(id))).toEqual({ status: 200, seen: [`cancel ${id}`] });
        expect(await call('POST', taskRetryPath(id))).toEqual({ status: 200, seen: [`retry ${id}`] });
        expect(await call('GET', resourceOwnerPath(id))).toEqual({ status: 200, seen: [`resource ${id}`] });
        const own = { ...auth, 'x-leasehold-console': '1' };
        expect(await call('POST', consoleAction(id, 'cancel'), own)).toEqual({ status: 200, seen: [`cancel ${id}`] });
        expect(await call('POST', consoleAction(id, 'retry'), own)).toEqual({ status: 200, seen: [`retry ${id}`] });
      }),
      { numRuns: 300 },
    );
  });
});

describe('ids no path can address are refused at submit', () => {
  it.each(['.', '..', 'a/..', '../a', '/a', 'a//b'])(
    '%s: 400 INVALID_MESSAGE, as task id and as resource',
    async (id) => {
      for (const body of [
        { taskId: id, resource: 'r', payload: 1 },
        { taskId: 't', resource: id, payload: 1 },
      ]) {
        seen.length = 0;
        const res = await app.inject({ method: 'POST', url: '/v1/tasks', headers: auth, payload: body });
        expect(res.statusCode, JSON.stringify(body)).toBe(400);
        expect(res.json()).toMatchObject({ type: 'error', code: 'INVALID_MESSAGE' });
        expect(seen).toEqual([]);
      }
    },
  );

  it('and the percent-encoded spelling of a dot segment never reaches a task handler', async () => {
    for (const target of ['/v1/tasks/%2E', '/v1/tasks/%2e', '/v1/tasks/.']) {
      const res = await call('GET', target);
      expect(
        res.seen.filter((s) => s.startsWith('get ')),
        target,
      ).toEqual([]);
    }
  });
});
