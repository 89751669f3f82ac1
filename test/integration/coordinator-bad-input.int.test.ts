/**
 * Bad input on every surface is refused with a stable code and changes nothing in etcd:
 * WebSocket upgrade auth (401), frames (INVALID_MESSAGE / PAYLOAD_TOO_LARGE / version mismatch),
 * repeated abuse (close 1008), requests by a non-holder (NOT_HOLDER), and the HTTP API
 * (400/401/404/409/413 with the protocol's ErrorMessage body).
 */
import { ErrorMessageSchema, PROTOCOL_VERSION, type Grant } from '@leasehold/protocol';
import { beforeAll, describe, expect, it } from 'vitest';
import { AdminClient, TestWorker, UpgradeRefused, etcdSnapshot } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';

const PREFIX = 'test/coordinator-bad-input/';
const MAX_PAYLOAD = 4_096;
const MAX_SESSIONS = 2;
const CREDENTIAL = { keyId: 'key-limited', workerId: 'w-limited', secret: 'Limited-secret-0a9b8c7d6e5f' };
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 5_000 });
let url: string;
let admin: AdminClient;

beforeAll(async () => {
  const c = await stack.coordinator({
    LEASEHOLD_COORDINATOR_MAX_PAYLOAD_BYTES: String(MAX_PAYLOAD),
    // A worker's own credential too (besides the harness's shared key), with a small session limit.
    LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: `${CREDENTIAL.keyId}:${CREDENTIAL.workerId}:${CREDENTIAL.secret}`,
    LEASEHOLD_COORDINATOR_MAX_SESSIONS_PER_WORKER: String(MAX_SESSIONS),
  });
  url = c.url;
  admin = stack.admin(url);
});

const snapshot = () => etcdSnapshot(stack.etcd.endpoints, PREFIX);

async function refusedUpgrade(key: string | undefined, path = ''): Promise<number> {
  try {
    const w = await TestWorker.connect(`${url}${path}`, key);
    w.close();
    return 101;
  } catch (err) {
    if (err instanceof UpgradeRefused) return err.status;
    throw err;
  }
}

describe('WebSocket upgrade auth', () => {
  it('refuses a missing, wrong or non-worker key with 401 and creates nothing', async () => {
    const before = await snapshot();
    expect(await refusedUpgrade(undefined)).toBe(401);
    expect(await refusedUpgrade('wrong-key-0123456789')).toBe(401);
    expect(await refusedUpgrade(stack.keys.adminKey)).toBe(401);
    expect(await snapshot()).toEqual(before);
  });
});

describe('frames', () => {
  it('refuses each bad frame with a code and changes nothing in etcd', async () => {
    await admin.submit('t1', 'bad/r1');
    const w = await stack.worker(url, 'w1');
    const before = await snapshot();
    const frames: [string, string, string][] = [
      ['non-JSON', '{nope', 'INVALID_MESSAGE'],
      ['JSON, not an object', '[1, 2]', 'INVALID_MESSAGE'],
      ['unknown type', JSON.stringify({ type: 'lease.steal', id: 'x' }), 'INVALID_MESSAGE'],
      [
        'token as a number',
        JSON.stringify({ type: 'lease.renew', id: 'x', resource: 'bad/r1', token: 5, incarnation: 'inc-1' }),
        'INVALID_MESSAGE',
      ],
      [
        'negative token',
        JSON.stringify({ type: 'lease.renew', id: 'x', resource: 'bad/r1', token: '-5', incarnation: 'inc-1' }),
        'INVALID_MESSAGE',
      ],
      [
        'resource with ..',
        JSON.stringify({ type: 'lease.acquire', id: 'x', requestId: 'q', taskId: 'a/../b' }),
        'INVALID_MESSAGE',
      ],
      ['missing request id', JSON.stringify({ type: 'lease.acquire', id: 'x' }), 'INVALID_MESSAGE'],
      [
        'second hello',
        JSON.stringify({
          type: 'hello',
          id: 'x',
          protocolVersion: PROTOCOL_VERSION,
          workerId: 'w1',
          incarnation: 'inc-1',
        }),
        'INVALID_MESSAGE',
      ],
      [
        'oversize frame',
        JSON.stringify({ type: 'heartbeat', id: 'x', sessionId: 'ab', pad: 'x'.repeat(MAX_PAYLOAD) }),
        'PAYLOAD_TOO_LARGE',
      ],
    ];
    for (const [name, frame, code] of frames) {
      const count = w.received.length;
      w.sendRaw(frame);
      const reply = await w.next((m) => m.type === 'error' && w.received.indexOf(m) >= count);
      expect(ErrorMessageSchema.parse(reply), name).toMatchObject({ code });
    }
    expect(await snapshot()).toEqual(before);
    // Still usable after 9 bad frames...
    expect(await w.heartbeat()).toMatchObject({ type: 'heartbeat.ack' });
    // ...and the 10th closes the socket with 1008.
    w.sendRaw('{nope');
    expect((await w.closed).code).toBe(1008);
  });

  it('refuses a binary frame — even one carrying a valid hello — and closes with 1003', async () => {
    const before = await snapshot();
    const hello = { type: 'hello', id: 'b1', protocolVersion: PROTOCOL_VERSION, workerId: 'w-bin', incarnation: 'i' };
    const fresh = await TestWorker.connect(url, stack.keys.workerKey);
    fresh.sendRaw(Buffer.from(JSON.stringify({ ...hello, capacity: 1 }), 'utf8'));
    expect(await fresh.next((m) => m.type === 'error')).toMatchObject({ code: 'INVALID_MESSAGE' });
    expect((await fresh.closed).code).toBe(1003);
    expect(fresh.received.some((m) => m.type === 'welcome')).toBe(false);
    expect(await snapshot()).toEqual(before); // no session was opened
    // With a session open, a binary frame ends the connection the same way (nothing is read).
    const w = await stack.worker(url, 'w-bin');
    w.sendRaw(Buffer.from([0xff, 0x00, 0x13]));
    expect((await w.closed).code).toBe(1003);
  });

  it('one credential holds at most MAX_SESSIONS_PER_WORKER sessions; the next hello gets LIMIT_REACHED', async () => {
    const key = `${CREDENTIAL.keyId}:${CREDENTIAL.secret}`;
    const held: TestWorker[] = [];
    for (let i = 0; i < MAX_SESSIONS; i += 1) {
      const w = await TestWorker.connect(url, key);
      await w.hello(CREDENTIAL.workerId, `inc-${i}`);
      held.push(w);
    }
    const before = await snapshot();
    const extra = await TestWorker.connect(url, key);
    expect(await extra.request(helloFrame(CREDENTIAL.workerId, 'inc-extra'))).toMatchObject({
      type: 'error',
      code: 'LIMIT_REACHED',
      retryable: true,
    });
    // Several at once: none gets past the limit.
    const burst = await Promise.all([0, 1, 2, 3].map(() => TestWorker.connect(url, key)));
    const answers = await Promise.all(burst.map((w, i) => w.request(helloFrame(CREDENTIAL.workerId, `b${i}`))));
    expect(answers.map((a) => (a.type === 'error' ? a.code : a.type))).toEqual(Array(4).fill('LIMIT_REACHED'));
    expect(await snapshot()).toEqual(before); // no session key was created
    // Resuming one of its own sessions (a reconnect) is not a new session.
    const first = held[0];
    if (first === undefined) throw new Error('no session');
    const sessionId = first.sessionId;
    first.terminate();
    await first.closed;
    const back = await TestWorker.connect(url, key);
    expect(await back.hello(CREDENTIAL.workerId, 'inc-0', sessionId)).toMatchObject({ resumed: true, sessionId });
    for (const w of [...held, extra, ...burst, back]) w.close();
  });

  it('refuses requests before hello', async () => {
    const w = await TestWorker.connect(url, stack.keys.workerKey);
    expect(await w.request({ type: 'heartbeat', sessionId: 'ab' })).toMatchObject({ code: 'INVALID_MESSAGE' });
    w.close();
  });

  it('refuses an incompatible protocol version and closes', async () => {
    const before = await snapshot();
    const w = await TestWorker.connect(url, stack.keys.workerKey);
    const reply = await w.request({ type: 'hello', protocolVersion: 999, workerId: 'w9', incarnation: 'i' });
    expect(reply).toMatchObject({ type: 'error', code: 'PROTOCOL_VERSION_MISMATCH', retryable: false });
    expect((await w.closed).code).toBe(4000);
    expect(await snapshot()).toEqual(before);
  });

  it('refuses renew / complete / release by a non-holder with NOT_HOLDER and changes nothing', async () => {
    await admin.submit('t2', 'bad/r2');
    const holder = await stack.worker(url, 'holder');
    const g = (await holder.acquire('q1', 't2')) as Grant;
    expect(g.type).toBe('lease.granted');
    const intruder = await stack.worker(url, 'intruder');
    const before = await snapshot();
    const other = { taskId: 't2', resource: g.resource, token: g.token };
    expect(await intruder.renew(g.resource, g.token)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await intruder.complete(other, 'task:t2')).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await intruder.release(g.resource, g.token)).toMatchObject({ code: 'NOT_HOLDER' });
    const wrongToken = String(BigInt(g.token) + 1n);
    expect(await holder.renew(g.resource, wrongToken)).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await holder.renew(g.resource, g.token, 'inc-other')).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await holder.complete({ ...other, token: wrongToken }, 'task:t2')).toMatchObject({ code: 'NOT_HOLDER' });
    expect(await snapshot()).toEqual(before);
    expect(await holder.renew(g.resource, g.token)).toMatchObject({ type: 'lease.renewed' });
    holder.close();
    intruder.close();
  });
});

describe('HTTP', () => {
  it('answers bad requests with coded ErrorMessage bodies and changes nothing', async () => {
    await admin.submit('t3', 'bad/r3', { a: 1 });
    const before = await snapshot();
    const cases: [string, () => Promise<{ status: number; body: unknown }>, number, string][] = [
      ['no key', () => new AdminClient(url, undefined).call('GET', '/v1/tasks'), 401, 'UNAUTHENTICATED'],
      ['worker key', () => new AdminClient(url, stack.keys.workerKey).call('GET', '/v1/tasks'), 401, 'UNAUTHENTICATED'],
      ['invalid JSON', () => admin.call('POST', '/v1/tasks', undefined, { raw: '{nope' }), 400, 'INVALID_MESSAGE'],
      [
        'schema violation',
        () => admin.call('POST', '/v1/tasks', { taskId: 'a/../b', resource: 'r', payload: 1 }),
        400,
        'INVALID_MESSAGE',
      ],
      [
        'extra field',
        () => admin.call('POST', '/v1/tasks', { taskId: 'x', resource: 'r', payload: 1, state: 'completed' }),
        400,
        'INVALID_MESSAGE',
      ],
      [
        'too large',
        () => admin.submit('big', 'bad/big', { pad: 'x'.repeat(MAX_PAYLOAD * 2) }),
        413,
        'PAYLOAD_TOO_LARGE',
      ],
      ['conflicting definition', () => admin.submit('t3', 'bad/r3', { a: 2 }), 409, 'CONFLICT'],
      ['unknown task', () => admin.task('nope'), 404, 'NOT_FOUND'],
      ['cancel unknown task', () => admin.cancel('nope'), 404, 'NOT_FOUND'],
      ['unknown route', () => admin.call('GET', '/v1/nothing'), 404, 'NOT_FOUND'],
      ['bad list limit', () => admin.call('GET', '/v1/tasks?limit=0'), 400, 'INVALID_MESSAGE'],
      ['bad state filter', () => admin.call('GET', '/v1/tasks?state=weird'), 400, 'INVALID_MESSAGE'],
    ];
    for (const [name, call, status, code] of cases) {
      const res = await call();
      expect(res.status, name).toBe(status);
      expect(ErrorMessageSchema.parse(res.body), name).toMatchObject({ type: 'error', code });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('serves /healthz, /readyz and /metrics without a key', async () => {
    const open = new AdminClient(url, undefined);
    expect(await open.call('GET', '/healthz')).toMatchObject({ status: 200, body: { status: 'ok' } });
    expect(await open.call('GET', '/readyz')).toMatchObject({
      status: 200,
      body: { ready: true, degraded: false, checks: { etcd: true, sink: 'ok', index: true }, problems: [] },
    });
    const metrics = await fetch(`${url}/metrics`).then((r) => r.text());
    for (const name of [
      'leasehold_coordinator_sessions',
      'leasehold_coordinator_grants_total',
      'leasehold_coordinator_grant_wait_seconds',
      'leasehold_coordinator_grant_work_seconds',
      'leasehold_coordinator_renew_refusals_total',
      'leasehold_coordinator_session_expiries_total',
      'leasehold_coordinator_etcd_txn_seconds',
    ]) {
      expect(metrics).toContain(name);
    }
    expect(metrics).toMatch(/leasehold_coordinator_renew_refusals_total\{reason="not_holder"\} [1-9]/);
  });
});

function helloFrame(workerId: string, incarnation: string): Record<string, unknown> {
  return { type: 'hello', protocolVersion: PROTOCOL_VERSION, workerId, incarnation, capacity: 1 };
}
