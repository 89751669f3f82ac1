/**
 * The fence-target seam of `createCoordinator` (`wrapFenceTarget`, an ordinary dependency-injection
 * seam, default none): it is given the HTTP target built from `config.sink`, and what it returns
 * is the coordinator's fence target — the one closed at close. In-memory etcd, no socket. (That
 * every advance goes through it is shown end to end by the chaos `grant-before-advance` run.)
 */
import { ManualClock, ManualTimers, MemoryEtcd } from '@leasehold/testing';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { FenceTarget } from './fence/port.js';
import { SinkFenceTarget } from './fence/sink-fence-target.js';
import { createCoordinator, type CoordinatorDeps } from './index.js';
import { MemoryFenceTarget, testConfig } from './testing/service-harness.js';

async function run(deps: Partial<CoordinatorDeps>): Promise<void> {
  const clock = new ManualClock(0);
  const timers = new ManualTimers(clock);
  const etcd = new MemoryEtcd({ clock, timers });
  const coordinator = await createCoordinator(testConfig(), {
    logger: pino({ level: 'silent' }),
    clock,
    timers,
    backend: etcd.connect(),
    listen: false,
    ...deps,
  });
  await coordinator.close();
}

/** A fence target over memory that counts its closes. */
function countingTarget(): FenceTarget & { closes: number } {
  const memory = new MemoryFenceTarget();
  const target = {
    closes: 0,
    advanceBatch: (items: Parameters<FenceTarget['advanceBatch']>[0]) => memory.advanceBatch(items),
    ping: () => memory.ping(),
    close: () => {
      target.closes += 1;
    },
  };
  return target;
}

describe('createCoordinator: wrapFenceTarget', () => {
  it('is given the HTTP target of config.sink, and what it returns is closed at close', async () => {
    const wrapped: FenceTarget[] = [];
    const target = countingTarget();
    await run({
      wrapFenceTarget: (sink) => {
        wrapped.push(sink);
        return target;
      },
    });
    expect(wrapped).toHaveLength(1);
    expect(wrapped[0]).toBeInstanceOf(SinkFenceTarget);
    expect(target.closes).toBe(1);
  });

  it('is not called when a fenceTarget is given (that one is the caller’s to close)', async () => {
    const given = countingTarget();
    let calls = 0;
    await run({
      fenceTarget: given,
      wrapFenceTarget: (sink) => {
        calls += 1;
        return sink;
      },
    });
    expect(calls).toBe(0);
    expect(given.closes).toBe(0);
  });
});
