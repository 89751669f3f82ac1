import { ManualClock, ManualTimers } from '@leasehold/testing';
import { describe, expect, it } from 'vitest';
import { EarliestTimer } from './timers.js';

function setup(minDelayMs = 0) {
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  const fired: number[] = [];
  const timer = new EarliestTimer(
    timers,
    () => clock.nowMs(),
    () => fired.push(clock.nowMs()),
    minDelayMs,
  );
  return { clock, timers, fired, timer };
}

describe('EarliestTimer', () => {
  it('keeps one timer, moved only by an earlier deadline, and fires once at it', async () => {
    const { timers, fired, timer } = setup();
    timer.setBy(1_500);
    timer.setBy(1_800); // later: left alone
    expect([timer.atMs, timers.pending]).toEqual([1_500, 1]);
    timer.setBy(1_200); // earlier: moved
    expect([timer.atMs, timers.pending]).toEqual([1_200, 1]);
    await timers.advance(1_000);
    expect(fired).toEqual([1_200]);
    expect([timer.atMs, timers.pending]).toEqual([undefined, 0]);
  });

  it('is unset before it calls back, so the callback can set it again, even for a later time', async () => {
    const { timers, fired } = setup();
    const again = new EarliestTimer(
      timers,
      () => timers.clock.nowMs(),
      () => {
        fired.push(timers.clock.nowMs());
        if (fired.length === 1) again.setBy(timers.clock.nowMs() + 300);
      },
    );
    again.setBy(1_100);
    await timers.advance(1_000);
    expect(fired).toEqual([1_100, 1_400]);
    expect(again.atMs).toBeUndefined();
  });

  it('fires a past deadline after the minimum delay; clear() unsets it until the next setBy', async () => {
    const { timers, fired, timer } = setup(1);
    timer.setBy(500);
    expect(timers.nextAtMs()).toBe(1_001);
    timer.clear();
    await timers.advance(100);
    expect(fired).toEqual([]);
    timer.setBy(1_150.5); // a fractional deadline: the wait is rounded up, never early
    await timers.advance(100);
    expect(fired).toEqual([1_151]);
  });
});
