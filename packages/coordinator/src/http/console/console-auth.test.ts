/**
 * The console's auth on the real fastify server (raw HTTP, as a browser or an attacker sends it):
 * no credential is 401, a wrong key is logged and refused, the session cookie opens the console's
 * routes and nothing else, and a state change needs the console's header and this origin (CSRF).
 */
import { rawHttp } from '@leasehold/devkit';
import { DEFAULT_RETRY_POLICY, type TaskView } from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../metrics.js';
import type { TaskApi } from '../routes-tasks.js';
import { createHttpServer } from '../server.js';
import { issueConsoleSession, verifyConsoleSession } from './session-cookie.js';

const ADMIN_KEY = 'admin-key-0123456789abcdef';
const calls: string[] = [];
const warnings: string[] = [];
const view = (taskId: string): TaskView => ({
  taskId,
  resource: 'r',
  payload: 1,
  state: 'cancelled',
  attempts: 0,
  priority: 0,
  retry: DEFAULT_RETRY_POLICY,
  lastEvent: 'cancelled',
  history: [],
});
const refuse = () => Promise.reject(new Error('not used'));
const tasks: TaskApi = {
  submit: refuse,
  submitMany: refuse,
  get: refuse,
  list: refuse,
  purge: refuse,
  resource: refuse,
  cancel: (taskId) => {
    calls.push(`cancel ${taskId}`);
    return Promise.resolve({ ok: true, task: view(taskId) });
  },
  retry: (taskId) => {
    calls.push(`retry ${taskId}`);
    return Promise.resolve({ ok: true, task: view(taskId) });
  },
};

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  const log = pino(
    { level: 'warn' },
    {
      write: (line: string) => {
        warnings.push((JSON.parse(line) as { msg: string }).msg);
      },
    },
  );
  app = createHttpServer({
    adminKeys: [ADMIN_KEY],
    maxPayloadBytes: 65_536,
    tasks,
    metrics: new Metrics(),
    log,
    readiness: () => Promise.resolve({ ready: true, degraded: false, checks: { etcd: true }, problems: [] }),
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  port = address.port;
});
afterAll(async () => {
  await app.close();
});
afterEach(() => {
  calls.length = 0;
  warnings.length = 0;
});

const own = { 'x-leasehold-console': '1' };

async function login(key: string) {
  return rawHttp(port, {
    method: 'POST',
    target: '/ui/api/login',
    headers: { ...own, 'Content-Type': 'application/json' },
    body: JSON.stringify({ key }),
  });
}

async function cookie(): Promise<string> {
  const answer = await login(ADMIN_KEY);
  expect(answer.status).toBe(204);
  const set = answer.headers['set-cookie'] ?? '';
  expect(set).toMatch(/^lh_console=v1\.[^;]+; Path=\/ui; HttpOnly; SameSite=Strict; Max-Age=28800$/);
  return set.split(';')[0] ?? '';
}

describe('console login', () => {
  it('refuses a wrong key with 401 and logs it; the page itself needs no key', async () => {
    const answer = await login('not-the-admin-key-0123');
    expect(answer.status).toBe(401);
    expect(answer.headers['set-cookie']).toBeUndefined();
    expect(warnings).toContain('console login refused: wrong admin key');
    const page = await rawHttp(port, { method: 'GET', target: '/ui' });
    expect([200, 503]).toContain(page.status); // 503 only when the assets are not built
  });

  it('answers 401 on every console data route without a credential, and does no work', async () => {
    for (const [method, target] of [
      ['GET', '/ui/api/resources'],
      ['GET', '/ui/api/tasks'],
      ['GET', '/ui/api/sessions'],
      ['GET', '/ui/api/stream'],
      ['GET', '/ui/api/resources/r1/timeline'],
      ['POST', '/ui/api/tasks/t1/cancel'],
      ['POST', '/ui/api/tasks/t1/retry'],
    ] as const) {
      const answer = await rawHttp(port, { method, target, headers: own });
      expect(answer.status, target).toBe(401);
      const forged = await rawHttp(port, {
        method,
        target,
        headers: { ...own, Cookie: 'lh_console=v1.9999999999999.AAAAAAAAAAAAAAAA.' + 'A'.repeat(43) },
      });
      expect(forged.status, `${target} with a forged cookie`).toBe(401);
    }
    expect(calls).toEqual([]);
  });

  it('the cookie opens the console routes, never the /v1 API', async () => {
    const session = await cookie();
    const whoami = await rawHttp(port, { method: 'GET', target: '/ui/api/whoami', headers: { Cookie: session } });
    expect(whoami.status).toBe(200);
    const v1 = await rawHttp(port, { method: 'DELETE', target: '/v1/tasks/t1', headers: { Cookie: session } });
    expect(v1.status).toBe(401);
    expect(calls).toEqual([]);
  });
});

describe('console state changes (CSRF)', () => {
  it('cancel and retry work with the cookie, the console header and this origin', async () => {
    const session = await cookie();
    const host = `http://127.0.0.1`;
    for (const action of ['cancel', 'retry']) {
      const answer = await rawHttp(port, {
        method: 'POST',
        target: `/ui/api/tasks/t1/${action}`,
        headers: { ...own, Cookie: session, Origin: host, 'Sec-Fetch-Site': 'same-origin' },
      });
      expect(answer.status, action).toBe(200);
    }
    expect(calls).toEqual(['cancel t1', 'retry t1']);
  });

  it('refuses 403 without the console header, from another origin, or a cross-site fetch', async () => {
    const session = await cookie();
    const tries: Record<string, string>[] = [
      { Cookie: session },
      { Cookie: session, 'x-leasehold-console': '1', Origin: 'https://evil.example' },
      { Cookie: session, 'x-leasehold-console': '1', 'Sec-Fetch-Site': 'cross-site' },
      // Same origin, but no console header (what a plain <form> post could send).
      { Cookie: session, Origin: 'http://127.0.0.1' },
    ];
    for (const headers of tries) {
      const answer = await rawHttp(port, { method: 'POST', target: '/ui/api/tasks/t1/cancel', headers, body: '' });
      expect(answer.status, JSON.stringify(headers)).toBe(403);
      expect(JSON.parse(answer.body)).toMatchObject({ code: 'FORBIDDEN' });
    }
    expect(calls).toEqual([]);
    expect(warnings).toContain('console request refused: not from the console page');
  });
});

describe('session cookie', () => {
  it('verifies with the key that signed it, until it expires, and not after the key is removed', () => {
    const value = issueConsoleSession(ADMIN_KEY, 1_000, 60_000);
    expect(verifyConsoleSession(value, [ADMIN_KEY], 2_000)).toBe(true);
    expect(verifyConsoleSession(value, ['other-key-0123456789abcd', ADMIN_KEY], 2_000)).toBe(true);
    expect(verifyConsoleSession(value, [ADMIN_KEY], 61_000)).toBe(false);
    expect(verifyConsoleSession(value, ['other-key-0123456789abcd'], 2_000)).toBe(false);
    const [v, exp, nonce, mac] = value.split('.');
    expect(verifyConsoleSession([v, String(Number(exp) + 1), nonce, mac].join('.'), [ADMIN_KEY], 2_000)).toBe(false);
  });
});
