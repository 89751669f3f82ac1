/**
 * Acquire: fence before grant, idempotency by request id, batching.
 *
 * - a grant lost on the wire is returned again (same token, same capability) to a retry with the
 *   same request id, on the same or another coordinator — never a second grant;
 * - a crash between the owner txn (a) and the grant (c): the retry completes the fence advance (b)
 *   at the sink before answering;
 * - when the sink refuses or fails the advance, no grant is sent and the owner key is removed;
 * - concurrent acquires share owner txns and sink batches, each resource with its own owner.
 */
import { SinkFenceTarget, type AdvanceItem, type FenceTarget } from '@leasehold/coordinator';
import type { Grant } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import { TestWorker, etcdSnapshot } from '../harness/coordinator.js';
import { useStack } from '../harness/fixtures.js';
import { waitFor } from '../harness/service.js';

const PREFIX = 'test/coordinator-acquire/';
const stack = useStack({ prefix: PREFIX, sessionTtlMs: 2_000 });

/** The real sink behind a switch: `hold()` parks advances until `release()`; `fail()` makes them throw. */
class GatedFence implements FenceTarget {
  readonly #inner: FenceTarget;
  #gate: Promise<void> | undefined;
  #open: (() => void) | undefined;
  #failing = false;
  readonly seen: AdvanceItem[][] = [];

  constructor() {
    this.#inner = new SinkFenceTarget({ url: stack.sinkUrl, key: stack.keys.sinkKey, timeoutMs: 5_000 });
  }

  hold(): void {
    this.#gate = new Promise((resolve) => (this.#open = resolve));
  }

  release(): void {
    this.#open?.();
    this.#gate = undefined;
  }

  fail(on: boolean): void {
    this.#failing = on;
  }

  async advanceBatch(items: readonly AdvanceItem[]) {
    this.seen.push([...items]);
    if (this.#gate !== undefined) await this.#gate;
    if (this.#failing) throw new Error('sink unreachable (test)');
    return this.#inner.advanceBatch(items);
  }

  ping() {
    return this.#inner.ping();
  }
}

const prefixOf = (name: string) => `${PREFIX}${name}/`;

async function ownerKeys(name: string) {
  const snap = await etcdSnapshot(stack.etcd.endpoints, `${prefixOf(name)}owners/`);
  return Object.entries(snap);
}

/** Every holding key (one per live grant, all sessions) under the test's prefix. */
async function holdingKeys(name: string) {
  return Object.keys(await etcdSnapshot(stack.etcd.endpoints, `${prefixOf(name)}holdings/`));
}

/** Keys under the test's prefix other than tasks and sessions: what grants left behind. */
async function leftovers(name: string) {
  // A task's own keys (record, payload, history) live as long as the task; sessions as long as theirs.
  const keep = ['tasks/', 'inputs/', 'history/', 'sessions/'].map((family) => `${prefixOf(name)}${family}`);
  const all = Object.keys(await etcdSnapshot(stack.etcd.endpoints, prefixOf(name)));
  return all.filter((k) => !keep.some((p) => k.startsWith(p)));
}

describe('acquire', () => {
  it('returns the same grant to a retry with the same request id after the grant was lost', async () => {
    const fence = new GatedFence();
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('lost') }, { fenceTarget: fence });
    const admin = stack.admin(c.url);
    await admin.submit('t1', 'lost/r1');
    const w = await stack.worker(c.url, 'w1');
    fence.hold();
    void w.acquire('q1').catch(() => undefined);
    await waitFor('owner key created', async () => ((await ownerKeys('lost')).length === 1 ? true : undefined));
    w.terminate(); // the grant is lost on the wire
    fence.release();

    const again = await TestWorker.connect(c.url, stack.keys.workerKey);
    expect(await again.hello('w1', 'inc-1', w.sessionId)).toMatchObject({ resumed: true });
    const first = (await again.acquire('q1')) as Grant;
    const second = (await again.acquire('q1')) as Grant;
    expect(first).toMatchObject({ type: 'lease.granted', taskId: 't1', attempt: 1 });
    expect(second).toMatchObject({ token: first.token, capability: first.capability, attempt: 1 });
    const owners = await ownerKeys('lost');
    expect(owners).toHaveLength(1);
    expect(owners[0]![1]).toBe(first.token); // token = create (= mod) revision of the one owner key
    expect((await admin.task('t1')).body).toMatchObject({ state: 'leased', attempts: 1 });
    again.close();
  });

  it('answers duplicate in-flight acquires with one grant', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('dup') });
    const admin = stack.admin(c.url);
    await admin.submit('t1', 'dup/r1');
    await admin.submit('t2', 'dup/r2');
    const w = await stack.worker(c.url, 'w1');
    const replies = await Promise.all([w.acquire('q1'), w.acquire('q1'), w.acquire('q1')]);
    const tokens = new Set(replies.map((r) => (r as Grant).token));
    expect(replies.every((r) => r.type === 'lease.granted')).toBe(true);
    expect(tokens.size).toBe(1);
    expect(await ownerKeys('dup')).toHaveLength(1);
    w.close();
  });

  it('completes the fence advance on retry after a crash between the owner txn and the grant', async () => {
    const stuck = new GatedFence();
    const c1 = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('crash') }, { fenceTarget: stuck });
    const c2 = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('crash') });
    await stack.admin(c1.url).submit('t1', 'crash/r1');
    const w = await stack.worker(c1.url, 'w1');
    stuck.hold(); // (a) happens, (b) never does on c1
    void w.acquire('q1').catch(() => undefined);
    await waitFor('owner key created', async () => ((await ownerKeys('crash')).length === 1 ? true : undefined));
    const [[, token]] = (await ownerKeys('crash')) as [[string, string]];
    expect((await stack.sinkClient.getResource('crash/r1')).fence).toBe(0n);
    await c1.close(); // c1 goes away mid-grant; its advance never reaches the sink

    const again = await TestWorker.connect(c2.url, stack.keys.workerKey);
    expect(await again.hello('w1', 'inc-1', w.sessionId)).toMatchObject({ resumed: true });
    const grant = await again.acquire('q1');
    expect(grant).toMatchObject({ type: 'lease.granted', token });
    expect((await stack.sinkClient.getResource('crash/r1')).fence).toBe(BigInt(token));
    stuck.release();
    again.close();
  });

  it('sends no grant and removes the owner key when the sink fails or refuses the advance', async () => {
    const fence = new GatedFence();
    // No backoff after an abandoned grant here: the second acquire must find the task grantable.
    const c = await stack.coordinator(
      { LEASEHOLD_COORDINATOR_PREFIX: prefixOf('refuse'), LEASEHOLD_COORDINATOR_RETRY_INITIAL_MS: '0' },
      { fenceTarget: fence },
    );
    const admin = stack.admin(c.url);
    await admin.submit('t1', 'refuse/r1');
    const w = await stack.worker(c.url, 'w1');

    fence.fail(true);
    expect(await w.acquire('q1')).toMatchObject({ type: 'error', code: 'UNAVAILABLE', retryable: true });
    expect(await ownerKeys('refuse')).toHaveLength(0);
    // The abandoned grant gave its attempt back.
    expect((await admin.task('t1')).body).toMatchObject({
      state: 'pending',
      attempts: 0,
      history: [{ outcome: 'abandoned' }],
    });
    fence.fail(false);

    // The sink's fence is already far ahead: the advance is refused (STALE_TOKEN), no grant.
    await stack.sinkClient.advance('refuse/r1', 1_000_000_000n);
    expect(await w.acquire('q2')).toMatchObject({ type: 'lease.none' });
    expect(await ownerKeys('refuse')).toHaveLength(0);
    expect((await admin.resource('refuse/r1')).body).toMatchObject({ owner: null });
    w.close();
  });

  it('batches concurrent acquires: one owner per resource, every fence at its token', async () => {
    const fence = new GatedFence();
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('batch') }, { fenceTarget: fence });
    const admin = stack.admin(c.url);
    const N = 12;
    for (let i = 0; i < N; i++) await admin.submit(`t${i}`, `batch/r${i}`);
    const workers = await Promise.all(Array.from({ length: N }, (_, i) => stack.worker(c.url, `w${i}`)));
    const replies = await Promise.all(workers.map((w) => w.acquire('q1')));
    expect(replies.map((r) => r.type)).toEqual(Array<string>(N).fill('lease.granted'));
    const grants = replies as Grant[];
    expect(new Set(grants.map((g) => g.resource)).size).toBe(N);
    for (const g of grants) expect((await stack.sinkClient.getResource(g.resource)).fence).toBe(BigInt(g.token));
    // Several grants shared one owner txn (same revision) and one sink call.
    expect(new Set(grants.map((g) => g.token)).size).toBeLessThan(N);
    expect(Math.max(...fence.seen.map((b) => b.length))).toBeGreaterThan(1);
    expect(await ownerKeys('batch')).toHaveLength(N);
    for (const w of workers) w.close();
  });

  it('grants and releases more acquires in one turn than one etcd txn may carry (128 ops)', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('wide') });
    const admin = stack.admin(c.url);
    const N = 64;
    for (let i = 0; i < N; i++) await admin.submit(`t${i}`, `wide/r${i}`);
    const workers = await Promise.all(Array.from({ length: 4 }, (_, i) => stack.worker(c.url, `w${i}`)));
    const replies = await Promise.all(Array.from({ length: N }, (_, i) => workers[i % 4]!.acquire(`q${i}`)));
    expect(replies.map((r) => r.type)).toEqual(Array<string>(N).fill('lease.granted'));
    const grants = replies as Grant[];
    expect(new Set(grants.map((g) => g.resource)).size).toBe(N);
    for (const g of grants) expect((await stack.sinkClient.getResource(g.resource)).fence).toBe(BigInt(g.token));
    expect(await ownerKeys('wide')).toHaveLength(N);
    expect(await holdingKeys('wide')).toHaveLength(N);
    // Releases of one turn share txns too; a stale one (wrong token) is refused alone.
    const stale = grants[0]!;
    const released = await Promise.all([
      ...grants.map((g, i) => workers[i % 4]!.release(g.resource, g.token)),
      workers[0]!.release(stale.resource, (BigInt(stale.token) - 1n).toString()),
    ]);
    expect(released.slice(0, N).map((r) => r.type)).toEqual(Array<string>(N).fill('lease.released'));
    expect(released[N]).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    expect(await ownerKeys('wide')).toHaveLength(0);
    // Nothing per grant outlives it while the sessions live on (no idempotency records pile up).
    expect(await leftovers('wide')).toEqual([]);
    for (const w of workers) w.close();
  });

  it('ends a session holding more grants than one etcd txn may delete: promptly, all keys at one revision', async () => {
    const c = await stack.coordinator({
      LEASEHOLD_COORDINATOR_PREFIX: prefixOf('many'),
      LEASEHOLD_COORDINATOR_FENCE_ON_EXPIRY: 'true',
    });
    const admin = stack.admin(c.url);
    const N = 150; // > MAX_END_SESSION_OWNERS (120): endSession cannot carry them
    const tasks = Array.from({ length: N }, (_, i) => ({ taskId: `t${i}`, resource: `many/r${i}`, payload: {} }));
    expect((await admin.call('POST', '/v1/tasks/batch', { tasks })).status).toBe(200);
    const holder = await stack.worker(c.url, 'holder');
    const grants = (await Promise.all(Array.from({ length: N }, (_, i) => holder.acquire(`q${i}`)))) as Grant[];
    expect(grants.map((g) => g.type)).toEqual(Array<string>(N).fill('lease.granted'));
    // No heartbeats: the deadline (TTL 2 s) passes; the end must not wait for the lease backstop.
    const started = Date.now();
    expect(await holder.push('session.expired', 10_000)).toMatchObject({ reason: 'deadline' });
    expect(Date.now() - started).toBeLessThan(2_000 + 1_500);
    await waitFor('owner keys gone', async () => (await ownerKeys('many')).length === 0, 5_000);
    expect(await leftovers('many')).toEqual([]);
    expect(Object.keys(await etcdSnapshot(stack.etcd.endpoints, `${prefixOf('many')}sessions/`))).toEqual([]);
    // Fence-on-expiry saw every owner key go with the session key: each fence moved past its grant.
    await waitFor(
      'fences advanced on expiry',
      async () => {
        for (const g of grants) {
          if ((await stack.sinkClient.getResource(g.resource)).fence <= BigInt(g.token)) return false;
        }
        return true;
      },
      10_000,
    );
    // The tasks are grantable again, at larger tokens.
    const taker = await stack.worker(c.url, 'taker');
    const again = (await taker.acquire('q-again')) as Grant;
    expect(again).toMatchObject({ type: 'lease.granted' });
    expect(BigInt(again.token)).toBeGreaterThan(BigInt(grants[N - 1]!.token));
    holder.close();
    taker.close();
  });

  it('takes the acquire a completion carries (next) once the completion is answered, even a refused one', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('next') });
    const admin = stack.admin(c.url);
    for (const i of [1, 2, 3]) await admin.submit(`t${i}`, `next/r${i}`);
    const w = await stack.worker(c.url, 'w1');
    expect(w.welcome?.features).toContain('complete.next');
    const replyTo = (id: string) => w.next((m) => 'inReplyTo' in m && m.inReplyTo === id);
    const g1 = (await w.acquire('q1')) as Grant;
    expect(g1).toMatchObject({ type: 'lease.granted' });
    const carried = replyTo('n1');
    const done = w.complete(g1, 'res-1', { next: { id: 'n1', requestId: 'q2' } });
    expect(await done).toMatchObject({ type: 'task.completed', taskId: g1.taskId });
    const g2 = (await carried) as Grant;
    expect(g2).toMatchObject({ type: 'lease.granted', requestId: 'q2', attempt: 1 });
    expect(g2.taskId).not.toBe(g1.taskId);
    // Taken after the completion was answered: its reply came first.
    const order = w.received.filter((m) => 'inReplyTo' in m && (m.inReplyTo === 'n1' || m.type === 'task.completed'));
    expect(order.map((m) => m.type)).toEqual(['task.completed', 'lease.granted']);
    // The carried acquire is idempotent by its request id, as a lone one: a retry gets the same grant.
    expect(await w.acquire('q2')).toMatchObject({ token: g2.token, capability: g2.capability });
    // A refused completion (a stale token) still takes the acquire it carries.
    const carriedAgain = replyTo('n2');
    const stale = { ...g2, token: (BigInt(g2.token) - 1n).toString() };
    const refused = w.complete(stale, 'res-2', { next: { id: 'n2', requestId: 'q3' } });
    expect(await refused).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    expect(await carriedAgain).toMatchObject({ type: 'lease.granted', requestId: 'q3' });
    expect((await admin.task(g1.taskId)).body).toMatchObject({ state: 'completed' });
    w.close();
  });

  it('completes of one turn share txns; a retried complete is a replay; a stale token is refused', async () => {
    const c = await stack.coordinator({ LEASEHOLD_COORDINATOR_PREFIX: prefixOf('done') });
    const admin = stack.admin(c.url);
    const N = 40;
    for (let i = 0; i < N; i++) await admin.submit(`t${i}`, `done/r${i}`);
    const workers = await Promise.all(Array.from({ length: 4 }, (_, i) => stack.worker(c.url, `w${i}`)));
    const grants = (await Promise.all(
      Array.from({ length: N }, (_, i) => workers[i % 4]!.acquire(`q${i}`)),
    )) as Grant[];
    expect(grants.map((g) => g.type)).toEqual(Array<string>(N).fill('lease.granted'));
    // The index shows the holders (the list judges `leased` from it): the completes can share txns.
    await waitFor(
      'the index shows every grant',
      async () => (await admin.list('?state=leased&limit=100')).body.tasks.length === N,
    );
    const stale = grants[0]!;
    const replies = await Promise.all([
      ...grants.map((g, i) => workers[i % 4]!.complete(g, `res-${g.taskId}`)),
      workers[0]!.complete({ ...stale, token: (BigInt(stale.token) - 1n).toString() }, 'res-stale'),
    ]);
    expect(replies.slice(0, N).map((r) => r.type)).toEqual(Array<string>(N).fill('task.completed'));
    expect(replies[N]).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    expect(await ownerKeys('done')).toHaveLength(0);
    expect(await leftovers('done')).toEqual([]);
    const tasks = await etcdSnapshot(stack.etcd.endpoints, `${prefixOf('done')}tasks/`);
    expect(new Set(Object.values(tasks)).size).toBeLessThan(N);
    for (const g of grants) {
      expect((await admin.task(g.taskId)).body).toMatchObject({
        state: 'completed',
        result: { resultId: `res-${g.taskId}`, token: g.token },
      });
    }
    // A retry after a lost reply: the same answer, nothing changes; another result id is refused.
    const again = grants[1]!;
    expect(await workers[1]!.complete(again, `res-${again.taskId}`)).toMatchObject({ type: 'task.completed' });
    expect(await workers[1]!.complete(again, 'res-other')).toMatchObject({ type: 'error', code: 'NOT_HOLDER' });
    for (const w of workers) w.close();
  });
});
