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
  options: { waitMs?: number; live?: () => boolean; carry?: boolean } = {},
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
        : { next: { id: nextId(), requestId: `q-${nextId()}`, waitMs: options.waitMs ?? 0 } },
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

async function holding(taskId: string, resource: string): Promise<{ w: TestWorkerHandle; token: bigint }> {
  await cluster.submit(c1, taskId, resource);
  const w = await cluster.worker(c1, 'w1');
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
