/**
 * The web console's login and logout on two real coordinators sharing a real etcd: a cookie issued
 * by one works on the other; a logout on one revokes it on both (the revocation is a key under the
 * prefix, on a lease of the cookie's remaining life, watched by every coordinator); wrong keys
 * from one address back off as CONSOLE_LOGIN_* say.
 *
 * Mechanism: ConsoleRevocations (http/console/console-revocations.ts) and txn
 * `revokeConsoleSession`. Make logout only clear the browser's cookie (as before) and the copy
 * keeps working on both coordinators for its 8 hours.
 */
import { rawHttp, type RawHttpAnswer } from '@leasehold/devkit';
import { Etcd3 } from 'etcd3';
import { beforeAll, describe, expect, it } from 'vitest';
import { useStack } from '../harness/fixtures.js';

const PREFIX = 'test/console-logout/';
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let portA: number;
let portB: number;

beforeAll(async () => {
  const env = {
    LEASEHOLD_COORDINATOR_CONSOLE_LOGIN_ATTEMPTS: '2',
    LEASEHOLD_COORDINATOR_CONSOLE_LOGIN_BACKOFF_MS: '60000',
  };
  portA = (await stack.coordinator(env)).address.port;
  portB = (await stack.coordinator(env)).address.port;
});

const own = { 'x-leasehold-console': '1' };

function login(port: number, key: string): Promise<RawHttpAnswer> {
  return rawHttp(port, {
    method: 'POST',
    target: '/ui/api/login',
    headers: { ...own, 'Content-Type': 'application/json' },
    body: JSON.stringify({ key }),
  });
}

const whoami = async (port: number, cookie: string) =>
  (await rawHttp(port, { method: 'GET', target: '/ui/api/whoami', headers: { Cookie: cookie } })).status;

describe('console logout on two coordinators', () => {
  it('revokes the cookie on both, through etcd', async () => {
    const answer = await login(portA, stack.keys.adminKey);
    expect(answer.status).toBe(204);
    const cookie = (answer.headers['set-cookie'] ?? '').split(';')[0] ?? '';
    expect(await whoami(portA, cookie)).toBe(200);
    expect(await whoami(portB, cookie)).toBe(200);

    const out = await rawHttp(portA, { method: 'POST', target: '/ui/api/logout', headers: { ...own, Cookie: cookie } });
    expect(out.status).toBe(204);
    expect(await whoami(portA, cookie)).toBe(401);
    await expect.poll(() => whoami(portB, cookie), { timeout: 5_000, interval: 20 }).toBe(401);

    // The revocation is one key under the prefix, on a lease (it goes when the cookie would expire).
    const client = new Etcd3({ hosts: stack.etcd.endpoints });
    try {
      const keys = await client.getAll().prefix(`${PREFIX}console/revoked/`).keys();
      expect(keys).toEqual([`${PREFIX}console/revoked/${cookie.split('.')[2] ?? ''}`]);
    } finally {
      client.close();
    }
    // Logging in again gives a fresh login that works on both.
    const again = ((await login(portB, stack.keys.adminKey)).headers['set-cookie'] ?? '').split(';')[0] ?? '';
    expect(await whoami(portA, again)).toBe(200);
  });

  it('backs off wrong keys from one address as configured (CONSOLE_LOGIN_ATTEMPTS=2)', async () => {
    const answers = await Promise.all([0, 1, 2, 3, 4].map(() => login(portB, 'not-the-admin-key-000000')));
    expect(answers.map((a) => a.status).sort()).toEqual([401, 401, 429, 429, 429]);
    const limited = answers.find((a) => a.status === 429);
    expect(limited?.headers['retry-after']).toBe('60');
    expect(JSON.parse(limited?.body ?? '{}')).toMatchObject({ code: 'LIMIT_REACHED' });
    expect((await login(portB, stack.keys.adminKey)).status).toBe(429);
    // Per coordinator: the other one has its own count.
    expect((await login(portA, stack.keys.adminKey)).status).toBe(204);
  });
});
