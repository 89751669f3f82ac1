/**
 * A coordinator cut off from etcd (its etcd link blackholed by a TCP proxy; the peer's link intact)
 * hands its workers to the peer: it stops serving its sessions and closes the sockets with 1001,
 * the SDK worker resumes on the peer, which adopts the session — the same session, its lease still
 * held, the handler's write accepted and the task completed once, by attempt 1. Without the hand-off
 * the worker would stay on the cut-off coordinator, acknowledged from memory, while etcd expired its
 * session and re-ran its task.
 */
import type { Coordinator } from '@leasehold/coordinator';
import { startEtcd, type EtcdHandle } from '@leasehold/devkit';
import { Worker } from '@leasehold/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Stack } from '../harness/coordinator.js';
import { startFaultProxy, type FaultProxy } from '../harness/fault-proxy.js';
import { waitFor } from '../harness/service.js';

let etcd: EtcdHandle;
let stack: Stack;
let proxy: FaultProxy;
let cut: Coordinator;
let peer: Coordinator;

const TTL = 3_000;
const GIVE_UP = 1_000;

beforeAll(async () => {
  etcd = await startEtcd();
  stack = await Stack.start({ etcd, prefix: 'test/etcd-loss/', sessionTtlMs: TTL, heartbeatIntervalMs: 500 });
  const port = Number(new URL(etcd.endpoints[0] ?? '').port);
  proxy = await startFaultProxy({ name: 'coordinator->etcd', targetPort: port });
  const common = {
    LEASEHOLD_COORDINATOR_ETCD_GIVE_UP_MS: String(GIVE_UP),
    LEASEHOLD_COORDINATOR_ETCD_TIMEOUT_MS: '500',
  };
  cut = await stack.coordinator({ ...common, LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: proxy.url });
  peer = await stack.coordinator(common);
});

afterAll(async () => {
  await stack.close();
  await proxy.close();
  await etcd.stop();
});

describe('a coordinator that loses etcd', () => {
  it('hands its workers to a healthy peer without losing their sessions', async () => {
    const admin = stack.admin(peer.url);
    let release: (() => void) | undefined;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const runs: { attempt: number; token: bigint }[] = [];
    const worker = new Worker({
      coordinators: [cut.url, peer.url],
      sink: { url: stack.sinkUrl },
      credentials: { workerKey: stack.keys.workerKey },
      workerId: 'mover',
      handler: async (task, ctx) => {
        runs.push({ attempt: task.attempt, token: ctx.token });
        await blocked;
        return { done: true };
      },
    });
    void worker.run();
    try {
      await admin.submit('moving', 'etcd-loss/r1', {});
      const before = await waitFor('the grant via the coordinator to be cut', async () => {
        const r = (await admin.resource('etcd-loss/r1')).body as {
          owner: { coordinatorId: string } | null;
          token: string;
        };
        return r.owner?.coordinatorId === cut.coordinatorId ? r : undefined;
      });
      proxy.setMode({ kind: 'blackhole' });
      const cutAt = Date.now();
      // The session moves to the peer (adopted: its record names the peer), token unchanged.
      const after = await waitFor('the session to move to the peer', async () => {
        const r = (await admin.resource('etcd-loss/r1')).body as {
          owner: { coordinatorId: string } | null;
          token: string;
        };
        return r.owner?.coordinatorId === peer.coordinatorId ? r : undefined;
      });
      const movedMs = Date.now() - cutAt;
      expect(after.token).toBe(before.token);
      // Within the give-up time plus a reconnect, well inside the etcd lease (TTL + 10 s margin).
      expect(movedMs).toBeLessThan(GIVE_UP + 4_000);
      release?.();
      const done = await waitFor('completion', async () => {
        const t = (await admin.task('moving')).body as { state: string; attempts: number; result?: { token: string } };
        return t.state === 'completed' ? t : undefined;
      });
      expect(done.attempts).toBe(1);
      expect(done.result?.token).toBe(before.token);
      expect(runs).toHaveLength(1);
      // The cut-off coordinator refuses hellos while it cannot reach etcd.
      const refused = await stack.worker(cut.url, 'late').then(
        () => 'accepted',
        (err: unknown) => String(err),
      );
      expect(refused).toMatch(/UNAVAILABLE|etcd/);
    } finally {
      proxy.setMode({ kind: 'pass' });
      await worker.close(1_000);
    }
  });
});
