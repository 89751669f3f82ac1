import { describe, expect, it } from 'vitest';
import { conservativeDeadlineMs, LocalDeadline } from './deadline.js';

describe('LocalDeadline', () => {
  it("counts from when the heartbeat was sent, minus drift and margin, so it is never later than the coordinator's", () => {
    // Sent at 1000, the coordinator accepted at >= 1000 with 900 ms left: its deadline >= 1900.
    expect(conservativeDeadlineMs(1_000, 900, { driftRatio: 0.01, marginMs: 20 })).toBe(1_000 + 891 - 20);
  });

  it('is invalid exactly at the deadline and after', () => {
    const d = new LocalDeadline();
    d.acknowledge(0, 1_000, { driftRatio: 0, marginMs: 0 });
    expect(d.isValidAt(999)).toBe(true);
    expect(d.isValidAt(1_000)).toBe(false);
    expect(d.remainingMs(1_500)).toBe(0);
  });

  it('never moves back on a late acknowledgement of an older heartbeat', () => {
    const d = new LocalDeadline();
    d.acknowledge(500, 1_000, { driftRatio: 0, marginMs: 0 });
    d.acknowledge(100, 1_000, { driftRatio: 0, marginMs: 0 });
    expect(d.deadlineMs).toBe(1_500);
  });

  it('is invalid before any acknowledgement and after clear()', () => {
    const d = new LocalDeadline();
    expect(d.isValidAt(0)).toBe(false);
    d.acknowledge(0, 1_000);
    d.clear();
    expect(d.isValidAt(1)).toBe(false);
  });
});
