/**
 * A coordinator (re)starts, lists, purges and serves the web console on an ordinary backlog
 * (issue 23): 6,000 pending tasks of 8 KiB plus a handful of maximum-size (256 KiB) ones, 48 MiB of
 * payloads in etcd, submitted through coordinator A's API; then coordinator B starts on that prefix
 * and must become ready, answer `GET /v1/tasks?limit=1`, walk every page, purge and open the
 * console.
 *
 * Under the layout of 0.2 (the payload inside `tasks/<id>`, index snapshot pages of 500 whole
 * records, gRPC's default 4 MiB receive limit) B failed at start with `RESOURCE_EXHAUSTED:
 * Received message larger than max`, and every list, purge and console snapshot answered 503.
 * Mechanisms: layout v2 (payloads under `inputs/`, read only by grants and task views), byte-bounded
 * pages (`Kv.rangePages`: N = page budget / largest record, halved on an oversized reply) and the
 * receive limit set from ETCD_MAX_RESPONSE_BYTES.
 */
import { rawHttp } from '@leasehold/devkit';
import { beforeAll, describe, expect, it } from 'vitest';
import type { AdminClient } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';

const PREFIX = 'test/big-backlog/';
const SMALL = 6_000;
const SMALL_BYTES = 8 * 1024;
const LARGE = 5;
const LARGE_BYTES = 256 * 1024 - 64;

const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let adminA: AdminClient;
let portA: number;

/** A JSON payload whose serialisation is about `bytes` long. */
const payloadOf = (i: number, bytes: number) => ({ i, pad: 'x'.repeat(bytes - 20) });

beforeAll(async () => {
  const a = await stack.coordinator();
  adminA = stack.admin(a.url);
  portA = a.address.port;
  const batches: { taskId: string; resource: string; payload: unknown }[][] = [];
  for (let start = 0; start < SMALL; start += 100) {
    batches.push(
      Array.from({ length: 100 }, (_, k) => ({
        taskId: `small/${String(start + k).padStart(5, '0')}`,
        resource: `r/${start + k}`,
        payload: payloadOf(start + k, SMALL_BYTES),
      })),
    );
  }
  // Two batches in flight at a time: about 50 MiB through the API in a few seconds.
  for (let i = 0; i < batches.length; i += 2) {
    const replies = await Promise.all(
      batches.slice(i, i + 2).map((tasks) => adminA.call('POST', '/v1/tasks/batch', { tasks })),
    );
    for (const reply of replies) expect(reply.status).toBe(200);
  }
  for (let i = 0; i < LARGE; i += 1) {
    const reply = await adminA.submit(`large/${i}`, `r/large-${i}`, payloadOf(i, LARGE_BYTES));
    expect(reply.status).toBe(201);
  }
  // Some ended tasks for the purge: cancelled ones.
  for (let i = 0; i < 20; i += 1) {
    expect((await adminA.cancel(`small/${String(i).padStart(5, '0')}`)).status).toBe(200);
  }
}, 180_000);

async function walk(admin: AdminClient): Promise<number> {
  let after: string | null = null;
  let seen = 0;
  for (let pages = 0; pages < 100; pages += 1) {
    const page = await admin.list(`?limit=1000${after === null ? '' : `&after=${encodeURIComponent(after)}`}`);
    expect(page.status).toBe(200);
    seen += page.body.tasks.length;
    after = page.body.next;
    if (after === null) break;
  }
  return seen;
}

async function consoleTaskTotal(port: number): Promise<number> {
  const login = await rawHttp(port, {
    method: 'POST',
    target: '/ui/api/login',
    headers: { 'x-leasehold-console': '1', 'Content-Type': 'application/json' },
    body: JSON.stringify({ key: stack.keys.adminKey }),
  });
  expect(login.status).toBe(204);
  const cookie = (login.headers['set-cookie'] ?? '').split(';')[0] ?? '';
  const tasks = await rawHttp(port, { method: 'GET', target: '/ui/api/tasks?limit=5', headers: { Cookie: cookie } });
  expect(tasks.status).toBe(200);
  return (JSON.parse(tasks.body) as { total: number }).total;
}

describe('a backlog of 48 MiB of payloads', () => {
  it('coordinator A (which took the submits) walks every page, shows a large task, opens the console', async () => {
    expect(await walk(adminA)).toBe(SMALL + LARGE);
    const view = await adminA.task('large/3');
    expect(view).toMatchObject({ status: 200, body: { payload: payloadOf(3, LARGE_BYTES) } });
    expect(await consoleTaskTotal(portA)).toBe(SMALL + LARGE);
  }, 60_000);

  it('a second coordinator starts on it, lists one task, walks every page, purges, opens the console', async () => {
    // gRPC's default receive limit, and 1 MiB pages: the byte-bounded pages are what make this work.
    const b = await stack.coordinator({
      LEASEHOLD_COORDINATOR_ETCD_MAX_RESPONSE_BYTES: String(4 * 1024 * 1024),
      LEASEHOLD_COORDINATOR_ETCD_PAGE_BYTES: String(1024 * 1024),
    });
    const adminB = stack.admin(b.url);
    expect((await adminB.call('GET', '/readyz')).status).toBe(200);
    const one = await adminB.list('?limit=1');
    expect(one.status).toBe(200);
    expect(one.body.tasks).toHaveLength(1);
    expect(one.body.next).not.toBeNull();
    expect(await walk(adminB)).toBe(SMALL + LARGE);
    const purged = await adminB.call('POST', '/v1/tasks/purge', { state: 'cancelled', olderThanMs: 0 });
    expect(purged).toMatchObject({ status: 200, body: { purged: 20, more: false } });
    expect(await consoleTaskTotal(b.address.port)).toBe(SMALL + LARGE - 20);
  }, 120_000);
});
