/**
 * The console's auth on the real fastify server (raw HTTP, as a browser or an attacker sends it):
 * no credential is 401, a wrong key is logged and refused, the session cookie opens the console's
 * routes and nothing else, and a state change needs the console's header and this origin (CSRF).
 * Login attempts are limited per address with backoff; logout revokes the cookie on every
 * coordinator sharing the store (two servers on one in-memory etcd here; on a real etcd in
 * test/integration/console-logout.int.test.ts); the cookie has one spelling per value.
 */
import { request } from 'node:http';
import { rawHttp } from '@leasehold/devkit';
import { DEFAULT_RETRY_POLICY } from '@leasehold/protocol';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KeyLayout } from '../../etcd/keys.js';
import { KvLeaseStore } from '../../etcd/lease-store.js';
import { MemoryEtcd } from '@leasehold/testing';
import { realTimers } from '../../timers.js';
import type { HttpOptions } from '../server.js';
import { ADMIN_KEY, capturingLog, recordingTasks, startTestServer } from '../../testing/http-fixture.js';
import { ConsoleReadModel } from '../../service/console/console-read-model.js';
import { ConsoleRevocations } from './console-revocations.js';
import { decodeConsoleSession, issueConsoleSession } from './session-cookie.js';

const calls: string[] = [];
const warnings: string[] = [];
const tasks = recordingTasks(calls, 'cancelled');

let app: FastifyInstance;
let port: number;

beforeAll(async () => {
  ({ app, port } = await startTestServer(tasks, { log: capturingLog('warn', warnings) }));
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

const verify = (value: string, keys: readonly string[], nowMs: number) =>
  decodeConsoleSession(value, keys, nowMs) !== undefined;

describe('session cookie', () => {
  it('verifies with the key that signed it, until it expires, and not after the key is removed', () => {
    const value = issueConsoleSession(ADMIN_KEY, 1_000, 60_000);
    expect(verify(value, [ADMIN_KEY], 2_000)).toBe(true);
    expect(decodeConsoleSession(value, [ADMIN_KEY], 2_000)).toEqual({ id: value.split('.')[2], expiresAtMs: 61_000 });
    expect(verify(value, ['other-key-0123456789abcd', ADMIN_KEY], 2_000)).toBe(true);
    expect(verify(value, [ADMIN_KEY], 61_000)).toBe(false);
    expect(verify(value, ['other-key-0123456789abcd'], 2_000)).toBe(false);
    const [v, exp, nonce, mac] = value.split('.');
    expect(verify([v, String(Number(exp) + 1), nonce, mac].join('.'), [ADMIN_KEY], 2_000)).toBe(false);
  });

  it('has one spelling per value: no leading zero in the expiry, no spare bits in the MAC', () => {
    const value = issueConsoleSession(ADMIN_KEY, 1_000, 60_000);
    const [v = '', exp = '', nonce = '', mac = ''] = value.split('.');
    // The last MAC character carries 4 bits; flipping one of its 2 spare bits decodes to the same bytes.
    const last = mac.at(-1) ?? 'A';
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const spare = alphabet[alphabet.indexOf(last) | 1] ?? last;
    expect(Buffer.from(mac.slice(0, -1) + spare, 'base64url')).toEqual(Buffer.from(mac, 'base64url'));
    const spellings: [string, string][] = [
      ['a leading zero in the expiry', [v, `0${exp}`, nonce, mac].join('.')],
      ['two leading zeros', [v, `00${exp}`, nonce, mac].join('.')],
      ['a spare bit set in the last MAC character', [v, exp, nonce, mac.slice(0, -1) + spare].join('.')],
      ['padding on the MAC', [v, exp, nonce, `${mac}=`].join('.')],
      ['an expiry past 2^53', [v, '9007199254740993', nonce, mac].join('.')],
      ['the version in capitals', ['V1', exp, nonce, mac].join('.')],
    ];
    for (const [what, spelled] of spellings) expect(verify(spelled, [ADMIN_KEY], 2_000), what).toBe(false);
    expect(verify(value, [ADMIN_KEY], 2_000)).toBe(true);
  });

  it('another spelling of a real cookie opens nothing on the server', async () => {
    const session = (await cookie()).slice('lh_console='.length);
    const [v = '', exp = '', nonce = '', mac = ''] = session.split('.');
    for (const spelled of [`${v}.0${exp}.${nonce}.${mac}`]) {
      const answer = await rawHttp(port, {
        method: 'GET',
        target: '/ui/api/whoami',
        headers: { Cookie: `lh_console=${spelled}` },
      });
      expect(answer.status, spelled).toBe(401);
    }
  });
});

/** Another console server (its own throttle and log) on a free port. */
async function startServer(
  extra: Partial<HttpOptions>,
): Promise<{ port: number; warnings: string[]; close(): Promise<void> }> {
  const logged: string[] = [];
  const server = await startTestServer(tasks, { log: capturingLog('info', logged), extra });
  return { port: server.port, warnings: logged, close: () => server.close() };
}

async function loginAt(at: number, key: string) {
  return rawHttp(at, {
    method: 'POST',
    target: '/ui/api/login',
    headers: { ...own, 'Content-Type': 'application/json' },
    body: JSON.stringify({ key }),
  });
}

const whoami = (at: number, session: string) =>
  rawHttp(at, { method: 'GET', target: '/ui/api/whoami', headers: { Cookie: session } });

describe('console login throttling (per client address, with backoff)', () => {
  it('after the free attempts every login from the address gets 429 with Retry-After, the right key too', async () => {
    let nowMs = 1_000_000;
    const server = await startServer({
      wallClock: () => nowMs,
      consoleLogin: { freeAttempts: 3, backoffMs: 10_000, backoffMaxMs: 60_000 },
    });
    try {
      // 20 wrong keys at once: 3 are looked at (401), the other 17 are refused unread.
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => loginAt(server.port, 'wrong-key-0123456789ab')),
      );
      const statuses = answers.map((a) => a.status).sort();
      expect(statuses).toEqual([...Array<number>(3).fill(401), ...Array<number>(17).fill(429)]);
      const limited = answers.find((a) => a.status === 429);
      expect(JSON.parse(limited?.body ?? '{}')).toMatchObject({ code: 'LIMIT_REACHED', retryable: true });
      expect(limited?.headers['retry-after']).toBe('10');
      // The right key is refused too while the lock lasts (else the lock tells a guesser nothing).
      expect((await loginAt(server.port, ADMIN_KEY)).status).toBe(429);
      expect(server.warnings.filter((w) => w === 'console login refused: wrong admin key')).toHaveLength(3);
      expect(server.warnings).toContain('console login refused: backing off after wrong keys');
      // Once the lock is over, the right key logs in (and the address is forgotten).
      nowMs += 10_000;
      expect((await loginAt(server.port, ADMIN_KEY)).status).toBe(204);
      expect((await loginAt(server.port, 'wrong-key-0123456789ab')).status).toBe(401);
    } finally {
      await server.close();
    }
  });
});

describe('console logout revokes the cookie', () => {
  it('on this server: the cookie is refused after logout', async () => {
    const server = await startServer({});
    try {
      const set = (await loginAt(server.port, ADMIN_KEY)).headers['set-cookie'] ?? '';
      const session = set.split(';')[0] ?? '';
      expect((await whoami(server.port, session)).status).toBe(200);
      const out = await rawHttp(server.port, {
        method: 'POST',
        target: '/ui/api/logout',
        headers: { ...own, Cookie: session },
      });
      expect(out.status).toBe(204);
      expect(out.headers['set-cookie']).toMatch(/^lh_console=; Path=\/ui; .*Max-Age=0/);
      expect((await whoami(server.port, session)).status).toBe(401);
      expect(server.warnings).toContain('console logout');
    } finally {
      await server.close();
    }
  });

  it('on every server sharing the store: logout on one, refused on the other', async () => {
    const clock = { nowMs: () => performance.now() };
    const etcd = new MemoryEtcd({ clock, timers: realTimers });
    const keys = new KeyLayout('console-test/');
    const open = async (coordinatorId: string) => {
      const store = new KvLeaseStore(etcd.connect(), keys);
      const revocations = new ConsoleRevocations({ store, wallClock: Date.now, log: pino({ level: 'silent' }) });
      await revocations.start();
      const hub = new ConsoleReadModel({
        coordinatorId,
        config: { retryPolicy: DEFAULT_RETRY_POLICY },
        store,
        // No watch feed here: the test is about logins, not the data.
        feed: { listen: () => () => undefined },
        remainingMs: () => undefined,
        sink: undefined,
        wallClock: Date.now,
        log: pino({ level: 'silent' }),
      });
      const server = await startServer({ consoleRevocations: revocations, console: hub });
      return {
        revocations,
        server: {
          ...server,
          close: async () => {
            await hub.close();
            await server.close();
          },
        },
      };
    };
    const a = await open('c-a');
    const b = await open('c-b');
    try {
      const set = (await loginAt(a.server.port, ADMIN_KEY)).headers['set-cookie'] ?? '';
      const session = set.split(';')[0] ?? '';
      expect((await whoami(b.server.port, session)).status).toBe(200);
      // A console stream on B, opened with the cookie: the logout on A ends it.
      const stream = await openStream(b.server.port, session);
      expect(stream.status).toBe(200);
      const out = await rawHttp(a.server.port, {
        method: 'POST',
        target: '/ui/api/logout',
        headers: { ...own, Cookie: session },
      });
      expect(out.status).toBe(204);
      expect((await whoami(a.server.port, session)).status).toBe(401);
      await expect.poll(async () => (await whoami(b.server.port, session)).status, { timeout: 5_000 }).toBe(401);
      await within(stream.ended, 5_000, 'the console stream on B did not end after the logout on A');
      expect((await openStream(b.server.port, session)).status).toBe(401);
    } finally {
      for (const s of [a, b]) {
        await s.server.close();
        await s.revocations.close();
      }
    }
  });
});

/** `GET /ui/api/stream` with a cookie: its status, and a promise that settles when the server ends it. */
function openStream(at: number, session: string): Promise<{ status: number; ended: Promise<void> }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: at, path: '/ui/api/stream', agent: false, headers: { cookie: session } },
      (res) => {
        const ended = new Promise<void>((done) => {
          res.on('end', done);
          res.on('close', done);
        });
        res.resume();
        resolve({ status: res.statusCode ?? 0, ended });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      reject(new Error(what));
    }, ms);
  });
  return Promise.race([p, timeout]).finally(() => {
    clearTimeout(timer);
  });
}
