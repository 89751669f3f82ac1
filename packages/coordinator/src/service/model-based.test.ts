/**
 * Model-based test of the code that runs: fast-check programs drive the real services (two
 * coordinators over the in-memory etcd, an in-memory fence with the sink's rules, a manual clock)
 * and the reference model of the design note (`LeaseTable` + `FencedStore` from the protocol) side
 * by side, and require the same answer at every step:
 *
 * - acquire: granted by both or refused by both (a live lease elsewhere);
 * - renew: accepted by both or refused by both (a renew at or after the deadline is refused);
 * - release: both;
 * - write under the worker's last token: written by both or refused (STALE_TOKEN) by both;
 * - tokens: the real tokens (etcd revisions) rise in the model's order, and every real grant's
 *   token is the fence at the moment the grant is returned (grant-before-fence);
 * - at most one worker holds a live lease on a resource, in the real system (two-live-owners).
 *
 * The mapping: each worker holds at most one resource at a time (then a session's deadline is its
 * lease's), and heartbeats when it asks for a lease (as the SDK does continuously).
 */
import { FencedStore, LeaseTable, SequenceAllocator, type CoordinatorMessage } from '@leasehold/protocol';
import { ManualClock } from '@leasehold/testing/clock';
import fc from 'fast-check';
import { beforeEach, describe, expect, it } from 'vitest';
import { ServiceCluster, type TestCoordinator, type TestWorkerHandle } from '../testing/service-harness.js';

const TTL = 3_000;
const WORKERS = 3;
const RESOURCES = 3;

type Action =
  | { readonly kind: 'acquire'; readonly worker: number; readonly resource: number }
  | { readonly kind: 'renew'; readonly worker: number }
  | { readonly kind: 'release'; readonly worker: number }
  | { readonly kind: 'write'; readonly worker: number; readonly resource: number }
  | { readonly kind: 'tick'; readonly ms: number };

const action: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('acquire' as const),
      worker: fc.nat(WORKERS - 1),
      resource: fc.nat(RESOURCES - 1),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('renew' as const), worker: fc.nat(WORKERS - 1) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('release' as const), worker: fc.nat(WORKERS - 1) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('write' as const),
      worker: fc.nat(WORKERS - 1),
      resource: fc.nat(RESOURCES - 1),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('tick' as const),
      ms: fc.oneof(fc.integer({ min: 1, max: 1_500 }), fc.constantFrom(TTL - 1, TTL, TTL + 1, 999, 1_000, 1_001)),
    }),
  },
);

interface Held {
  readonly resource: string;
  readonly real: bigint;
  readonly model: bigint;
}

interface WorkerState {
  readonly id: string;
  handle: TestWorkerHandle;
  /** The lease this worker believes it holds (at most one). */
  held: Held | undefined;
  /** Its last grant per resource (kept after the lease is lost: a stale worker writes with it). */
  readonly lastGrant: Map<string, Held>;
}

/** The model's view of the lease `w` holds (`held`) (its model token), as renew and release take it. */
const modelHolder = (w: WorkerState, held: Held) => ({
  resource: held.resource,
  token: held.model,
  workerId: w.id,
  incarnation: w.handle.incarnation,
});

/** What the programs exercised, summed over a property's runs (asserted: the test has teeth). */
const seen = { granted: 0, refused: 0, renewed: 0, renewRefused: 0, released: 0, written: 0, stale: 0, expired: 0 };

async function runProgram(actions: readonly Action[], fenceOnExpiry: boolean): Promise<void> {
  const cluster = new ServiceCluster(fenceOnExpiry ? { FENCE_ON_EXPIRY: 'true' } : {});
  const coordinators: TestCoordinator[] = [await cluster.coordinator('c1'), await cluster.coordinator('c2')];
  const modelClock = new ManualClock(cluster.clock.nowMs());
  const modelStore = new FencedStore();
  const model = new LeaseTable({
    clock: modelClock,
    allocator: new SequenceAllocator(),
    fences: modelStore,
    ttlMs: TTL,
    fenceOnExpiry,
  });
  const workers: WorkerState[] = [];
  for (let i = 0; i < WORKERS; i += 1) {
    const id = `w${i}`;
    const coordinator = coordinators[i % coordinators.length] ?? coordinators[0];
    if (coordinator === undefined) throw new Error('no coordinator');
    workers.push({ id, handle: await cluster.worker(coordinator, id), held: undefined, lastGrant: new Map() });
  }
  const pending = new Set<string>(); // resources with a pending task
  let taskSeq = 0;
  let writeSeq = 0;
  let lastRealToken = 0n;
  let lastModelToken = 0n;
  const trace: string[] = [];
  const fail = (message: string): never => {
    throw new Error(`${message}\n  trace:\n    ${trace.join('\n    ')}`);
  };

  const liveSession = async (w: WorkerState): Promise<void> => {
    if (w.handle.coordinator.services.sessions.isLive(w.handle.session)) return;
    w.handle = await cluster.worker(w.handle.coordinator, w.id);
  };

  try {
    for (const a of actions) {
      trace.push(JSON.stringify(a));
      switch (a.kind) {
        case 'acquire': {
          const w = workers[a.worker];
          if (w === undefined || w.held !== undefined) break; // one resource per worker
          const resource = `r${a.resource}`;
          await liveSession(w);
          if (!pending.has(resource)) {
            await cluster.submit(w.handle.coordinator, `t${++taskSeq}`, resource);
            pending.add(resource);
          }
          cluster.heartbeat(w.handle);
          const taskId = (await w.handle.coordinator.services.tasks.list({ state: 'pending', limit: 1000 })).tasks.find(
            (t) => t.resource === resource,
          )?.taskId;
          const real: CoordinatorMessage =
            taskId === undefined
              ? { type: 'lease.none', inReplyTo: 'x', requestId: 'x', retryAfterMs: 0 }
              : await cluster.acquire(w.handle, { taskId });
          const expected = model.acquire({
            resource,
            workerId: w.id,
            incarnation: w.handle.incarnation,
            requestId: `q${++writeSeq}`,
          });
          await cluster.settle();
          const granted = real.type === 'lease.granted';
          if (granted !== expected.ok)
            fail(`acquire ${w.id} ${resource}: real ${real.type}, model ${JSON.stringify(expected)}`);
          if (granted) seen.granted += 1;
          else seen.refused += 1;
          if (real.type === 'lease.granted' && expected.ok) {
            const token = BigInt(real.token);
            if (token <= lastRealToken || expected.lease.token <= lastModelToken) fail('tokens did not rise');
            if (cluster.fence.fence(resource) !== token) fail(`grant ${token} returned before its fence advance`);
            lastRealToken = token;
            lastModelToken = expected.lease.token;
            const held = { resource, real: token, model: expected.lease.token };
            w.held = held;
            w.lastGrant.set(resource, held);
          }
          break;
        }
        case 'renew': {
          const w = workers[a.worker];
          if (w?.held === undefined) break;
          const real = await cluster.renew(w.handle, w.held.resource, w.held.real);
          const expected = model.renew(modelHolder(w, w.held));
          const ok = real.type === 'lease.renewed';
          if (ok !== expected.ok)
            fail(`renew ${w.id}: real ${JSON.stringify(real)}, model ${JSON.stringify(expected)}`);
          if (ok) seen.renewed += 1;
          else seen.renewRefused += 1;
          if (!ok) w.held = undefined;
          break;
        }
        case 'release': {
          const w = workers[a.worker];
          if (w?.held === undefined) break;
          const real = await cluster.release(w.handle, w.held.resource, w.held.real);
          const expected = model.release(modelHolder(w, w.held));
          await cluster.settle();
          const ok = real.type === 'lease.released';
          if (ok !== expected.ok)
            fail(`release ${w.id}: real ${JSON.stringify(real)}, model ${JSON.stringify(expected)}`);
          if (ok) seen.released += 1;
          w.held = undefined;
          break;
        }
        case 'write': {
          const w = workers[a.worker];
          const grant = w?.lastGrant.get(`r${a.resource}`);
          if (w === undefined || grant === undefined) break;
          const real = cluster.fence.write(grant.resource, grant.real);
          const expected = modelStore.write(grant.resource, grant.model, `x${++writeSeq}`, { n: writeSeq });
          const want = expected.ok ? expected.outcome : expected.code;
          if (real !== want) fail(`write ${w.id} ${grant.resource}@${grant.real}: real ${real}, model ${want}`);
          if (real === 'written') seen.written += 1;
          if (real === 'STALE_TOKEN') seen.stale += 1;
          break;
        }
        case 'tick': {
          await cluster.advance(a.ms);
          modelClock.advance(a.ms);
          // Workers are not told: a worker whose lease expired still believes it holds it, and its
          // next renew or release must be refused by both.
          seen.expired += model.expire().length;
          break;
        }
      }
      // two-live-owners, on the real system: the store's owner keys vs the sessions that are live.
      const owners = cluster.owners();
      for (const w of workers) {
        const live = w.handle.coordinator.services.sessions.isLive(w.handle.session);
        const modelLive = w.held !== undefined && model.holderOf(w.held.resource)?.workerId === w.id;
        if (w.held !== undefined && live && modelLive && owners.get(w.held.resource) !== w.held.real) {
          fail(
            `${w.id} holds ${w.held.resource}@${w.held.real} but the store says ${String(owners.get(w.held.resource))}`,
          );
        }
      }
      const holders = new Map<string, string>();
      for (const w of workers) {
        if (w.held === undefined || model.holderOf(w.held.resource)?.workerId !== w.id) continue;
        const other = holders.get(w.held.resource);
        if (other !== undefined) fail(`two live owners of ${w.held.resource}: ${other} and ${w.id}`);
        holders.set(w.held.resource, w.id);
      }
    }
  } finally {
    await cluster.close();
  }
}

describe('the real services agree with the reference model', () => {
  beforeEach(() => {
    for (const key of Object.keys(seen) as (keyof typeof seen)[]) seen[key] = 0;
  });

  // Seeded: the closing check asks that every outcome (a stale write among them) was reached, and
  // some unseeded runs of 60 programs never produced a stale write (seen once on main, 2026-12-01).
  it('default mode: expiry alone does not move the fence', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 10, maxLength: 60 }), (actions) => runProgram(actions, false)),
      { numRuns: 60, seed: 424242 },
    );
    for (const [what, count] of Object.entries(seen)) expect(count, what).toBeGreaterThan(0);
  }, 120_000);

  it('fence-on-expiry mode: an expired holder is refused before any takeover', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(action, { minLength: 10, maxLength: 60 }), (actions) => runProgram(actions, true)),
      { numRuns: 40, seed: 424243 },
    );
    for (const [what, count] of Object.entries(seen)) expect(count, what).toBeGreaterThan(0);
  }, 120_000);
});
