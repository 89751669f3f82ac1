/**
 * A completion that carries its slot's next acquire: its reply is held until the carried acquire
 * is answered (so both leave in one turn, one write on the connection's cork), never while that
 * acquire waits for work, never past COMPLETION_HOLD_MS — and the completion itself is durable
 * before any of it.
 */
import type { CoordinatorMessage } from '@leasehold/protocol';
import { describe, expect, it } from 'vitest';
import {
  eachServiceCluster,
  nextId,
  tokenOf,
  type ServiceCluster,
  type TestCoordinator,
  type TestWorkerHandle,
} from '../testing/service-harness.js';
import { recordKvCalls } from '../testing/kv-calls.js';
import { COMPLETION_HOLD_MS } from './carried-acquire.js';

let cluster: ServiceCluster;
let c1: TestCoordinator;

eachServiceCluster((c, first) => {
  cluster = c;
  c1 = first;
});

interface Delivered {
  readonly message: CoordinatorMessage;
  /** Replies delivered in one synchronous run share a turn (the connection's cork sends them in one write). */
  readonly turn: number;
}

/** Complete `taskId` at `token` carrying an acquire; what the connection was handed, as it arrives. */
function completeCarrying(
  w: TestWorkerHandle,
  taskId: string,
  resource: string,
  token: bigint,
  options: { waitMs?: number; live?: () => boolean; carry?: boolean; requestId?: string } = {},
): Delivered[] {
  const delivered: Delivered[] = [];
  let turn = 0;
  let turnEnds = false;
  w.coordinator.services.carried.complete(
    w.session,
    cluster.completeMessage(
      w,
      taskId,
      resource,
      token,
      options.carry === false
        ? {}
        : { next: { id: nextId(), requestId: options.requestId ?? `q-${nextId()}`, waitMs: options.waitMs ?? 0 } },
    ),
    {
      live: options.live ?? (() => true),
      deliver: (message) => {
        delivered.push({ message, turn });
        if (!turnEnds) {
          turnEnds = true;
          queueMicrotask(() => {
            turnEnds = false;
            turn += 1;
          });
        }
      },
    },
  );
  return delivered;
}

const types = (d: readonly Delivered[]) => d.map((x) => x.message.type);

async function holding(
  taskId: string,
  resource: string,
  capacity = 100,
): Promise<{ w: TestWorkerHandle; token: bigint }> {
  await cluster.submit(c1, taskId, resource);
  const w = await cluster.worker(c1, 'w1', 'inc-1', capacity);
  const granted = await cluster.acquire(w, { taskId });
  return { w, token: tokenOf(granted) };
}

describe('a completion that carries the next acquire', () => {
  it('holds the completion reply until the carried grant is ready, then sends both in one turn', async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    cluster.fence.hold(); // the carried grant's fence advance waits
    const delivered = completeCarrying(w, 't1', 'r1', token);
    await cluster.settle();
    // The completion is durable already; only its reply waits for the grant.
    expect((await c1.services.tasks.get('t1'))?.state).toBe('completed');
    expect(cluster.fence.heldCount).toBe(1);
    expect(delivered).toEqual([]);
    cluster.fence.release();
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed', 'lease.granted']);
    expect(delivered[1]?.message).toMatchObject({ taskId: 't2', resource: 'r2' });
    expect(delivered[0]?.turn).toBe(delivered[1]?.turn);
    const text = await c1.services.metrics.registry.metrics();
    expect(text).toContain('leasehold_coordinator_completion_holds_total{ended="answered"} 1');
  });

  it('answers the completion at once when the carried acquire waits for work (long poll)', async () => {
    const { w, token } = await holding('t1', 'r1');
    const delivered = completeCarrying(w, 't1', 'r1', token, { waitMs: 10_000 });
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed']);
    await cluster.submit(c1, 't2', 'r2');
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed', 'lease.granted']);
    expect(delivered[1]?.message).toMatchObject({ taskId: 't2' });
  });

  it(`never holds the completion reply longer than ${COMPLETION_HOLD_MS} ms`, async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    cluster.fence.hold();
    const delivered = completeCarrying(w, 't1', 'r1', token);
    await cluster.settle();
    await cluster.advance(COMPLETION_HOLD_MS - 1);
    expect(delivered).toEqual([]);
    await cluster.advance(1);
    expect(types(delivered)).toEqual(['task.completed']);
    cluster.fence.release();
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed', 'lease.granted']);
  });

  it('takes the carried acquire after a refused completion too, its error reply held the same way', async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const delivered = completeCarrying(w, 't1', 'r1', token + 1n);
    await cluster.settle();
    expect(types(delivered)).toEqual(['error', 'lease.granted']);
    expect(delivered[1]?.message).toMatchObject({ taskId: 't2' });
    expect(delivered[0]?.turn).toBe(delivered[1]?.turn);
  });

  it('takes no carried acquire for a connection closed before the completion was answered', async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const delivered = completeCarrying(w, 't1', 'r1', token, { live: () => false });
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed']);
    expect([...cluster.owners().keys()]).toEqual([]);
  });

  it("grants in the completion's own txn: one etcd write for both, the grant's token the completion's revision", async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const names = recordKvCalls(c1.store.kv).txns;
    const delivered = completeCarrying(w, 't1', 'r1', token, { requestId: 'q-next' });
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed', 'lease.granted']);
    const grant = delivered[1]?.message;
    expect(grant).toMatchObject({ taskId: 't2', resource: 'r2', inReplyTo: expect.any(String) as unknown });
    const t1 = await c1.store.task('t1');
    expect(t1?.record.state).toBe('completed');
    // One txn ended t1 and granted t2: the token is the revision t1's record was completed at.
    expect(tokenOf(grant as CoordinatorMessage)).toBe(t1?.modRevision);
    expect(cluster.fence.fence('r2')).toBe(t1?.modRevision);
    expect(names).toEqual(['finishAttempt']);
    const text = await c1.services.metrics.registry.metrics();
    expect(text).toContain('leasehold_coordinator_carried_acquires_total{taken="in_completion_txn"} 1');
    // A retry of the carried request id gets the same grant back (the holding the txn wrote), and
    // the grant is the session's: its completion is accepted.
    expect(await cluster.acquire(w, { requestId: 'q-next' })).toMatchObject({
      type: 'lease.granted',
      token: t1?.modRevision.toString(),
    });
    expect(await cluster.complete(w, 't2', 'r2', tokenOf(grant as CoordinatorMessage))).toMatchObject({
      type: 'task.completed',
    });
  });

  it('needs no read when the completion arrives before the index has seen its grant, and still carries the next grant', async () => {
    await cluster.submit(c1, 't1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    const w = await cluster.worker(c1, 'w1');
    c1.backend.watchPaused = true; // the index will not see the grant of t1 before its completion
    const token = tokenOf(await cluster.acquire(w, { taskId: 't1' }));
    const { reads, txns } = recordKvCalls(c1.store.kv);
    const delivered = completeCarrying(w, 't1', 'r1', token);
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed', 'lease.granted']);
    expect(reads).toEqual([]);
    expect(txns).toEqual(['finishAttempt']);
    c1.backend.resumeWatch();
    await cluster.settle();
    expect((await c1.store.task('t1'))?.record.state).toBe('completed');
    expect(cluster.owners().get('r2')).toBe(tokenOf(delivered[1]?.message as CoordinatorMessage));
  });

  it('counts each completion riding with its carried grant once against capacity: a full session carries all of them in one txn', async () => {
    for (const [t, r] of [
      ['t1', 'r1'],
      ['t2', 'r2'],
      ['t3', 'r3'],
      ['t4', 'r4'],
    ] as const)
      await cluster.submit(c1, t, r);
    const w = await cluster.worker(c1, 'w1', 'inc-1', 2); // both slots busy
    const a = tokenOf(await cluster.acquire(w, { taskId: 't1' }));
    const b = tokenOf(await cluster.acquire(w, { taskId: 't2' }));
    const txns = recordKvCalls(c1.store.kv).txns;
    // Both complete in one turn, each carrying its slot's next acquire.
    const first = completeCarrying(w, 't1', 'r1', a);
    const second = completeCarrying(w, 't2', 'r2', b);
    // Meanwhile the session is full: an acquire of its own is refused.
    expect(await cluster.acquire(w)).toMatchObject({ type: 'error', code: 'CAPACITY_EXCEEDED' });
    await cluster.settle();
    expect(types(first)).toEqual(['task.completed', 'lease.granted']);
    expect(types(second)).toEqual(['task.completed', 'lease.granted']);
    // One txn ended both and granted both: neither carried acquire was refused for the other's lease.
    expect(txns).toEqual(['finishAttempts']);
    expect([...cluster.owners().keys()].sort()).toEqual(['r3', 'r4']);
  });

  it('never makes the carried grant when the completion is refused in etcd: the session stays within its capacity (G28)', async () => {
    // Capacity 1: the carried grant may only replace the completed lease, never add to it.
    const { w, token } = await holding('t1', 'r1', 1);
    await cluster.submit(c1, 't2', 'r2');
    // The owner key is rewritten behind the index's back (its mod_revision moves, the index does
    // not see it): the completion takes its fast path, and etcd refuses its finish.
    c1.backend.watchPaused = true;
    const owner = await c1.store.owner('r1');
    if (owner === undefined) throw new Error('no owner');
    await c1.store.kv.txn('test', {
      compare: [],
      success: [
        { type: 'put', key: c1.store.keys.owner('r1'), value: JSON.stringify(owner.record), lease: w.session.leaseId },
      ],
    });
    const delivered = completeCarrying(w, 't1', 'r1', token);
    await cluster.settle();
    expect(delivered.map((d) => d.message)).toMatchObject([
      { type: 'error', code: 'NOT_HOLDER' },
      { type: 'error', code: 'CAPACITY_EXCEEDED' },
    ]);
    // The session holds r1 still, and nothing else: no grant rode in the refused finish.
    expect([...cluster.owners().keys()]).toEqual(['r1']);
    expect((await c1.store.task('t2'))?.record.state).toBe('pending');
    c1.backend.resumeWatch();
  });

  it("finds the carried grant that its completion's txn made when that txn's reply was lost", async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    c1.backend.loseNextReply = true; // the finish txn (with the grant in it) is applied, its reply lost
    let open = true;
    const delivered = completeCarrying(w, 't1', 'r1', token, { requestId: 'q-next', live: () => open });
    open = false; // and the connection is lost with it (the grant rode already)
    await cluster.settle();
    expect(delivered.map((d) => d.message)).toMatchObject([{ type: 'error', code: 'UNAVAILABLE' }]);
    expect(cluster.owners().has('r2')).toBe(true);
    // The worker asks again with the same request id. Nothing else is grantable: the acquire reads
    // its request's holding instead of answering lease.none, which would leave t2 held, unknown to
    // the worker, for as long as the session lives.
    expect(await cluster.acquire(w, { requestId: 'q-next' })).toMatchObject({
      type: 'lease.granted',
      taskId: 't2',
      token: cluster.owners().get('r2')?.toString(),
    });
  });

  it('answers a completion without a carried acquire at once', async () => {
    const { w, token } = await holding('t1', 'r1');
    await cluster.submit(c1, 't2', 'r2');
    cluster.fence.hold();
    const delivered = completeCarrying(w, 't1', 'r1', token, { carry: false });
    await cluster.settle();
    expect(types(delivered)).toEqual(['task.completed']);
    expect(cluster.fence.heldCount).toBe(0);
  });
});
