import { describe, expect, it } from 'vitest';
import { coordinatorCalls, describeCalls, settled } from './cycle.js';

const TEXT = `# HELP leasehold_coordinator_batch_items Items per group-committed call
leasehold_coordinator_batch_items_bucket{le="1",kind="grant"} 3
leasehold_coordinator_batch_items_sum{kind="grant"} 40
leasehold_coordinator_batch_items_count{kind="grant"} 5
leasehold_coordinator_batch_items_sum{kind="finish"} 30
leasehold_coordinator_batch_items_count{kind="finish"} 10
leasehold_coordinator_etcd_txn_seconds_count{txn="grant_owners",outcome="ok"} 5
leasehold_coordinator_completion_holds_total{ended="answered"} 30
leasehold_coordinator_completion_holds_total{ended="waiting"} 6
leasehold_coordinator_acquire_wakes_total{result="selected"} 20
leasehold_coordinator_acquire_wakes_total{result="empty"} 8
leasehold_coordinator_etcd_txn_seconds_count{txn="grant_owners",outcome="failed"} 1
leasehold_coordinator_etcd_txn_seconds_count{txn="finish_attempts",outcome="ok"} 10
leasehold_coordinator_etcd_txn_seconds_sum{txn="finish_attempts",outcome="ok"} 0.5
leasehold_sink_write_batch_items_bucket{le="8"} 2
leasehold_sink_write_batch_items_sum 36
leasehold_sink_write_batch_items_count 4
`;

describe('cycle bench: coordinator calls per task', () => {
  it('reads items and calls per kind and txns per family (every outcome)', () => {
    expect(coordinatorCalls(TEXT)).toEqual({
      'items:grant': 40,
      'calls:grant': 5,
      'items:finish': 30,
      'calls:finish': 10,
      'txn:grant_owners': 6,
      'txn:finish_attempts': 10,
      'hold:answered': 30,
      'hold:waiting': 6,
      'wake:selected': 20,
      'wake:empty': 8,
      'items:sink_write': 36,
      'calls:sink_write': 4,
    });
  });

  it('per task of the window: txns by family, busiest first, and mean items per call', () => {
    expect(describeCalls(coordinatorCalls(TEXT), 40)).toBe(
      'etcd txns per task: finish_attempts 0.25, grant_owners 0.15; items per group-committed call: finish 3.0, grant 8.0, sink_write 9.0; completion replies held per task, by how the hold ended: answered 0.75, waiting 0.15; waiting acquires woken per task, by what they selected: selected 0.50, empty 0.20',
    );
    expect(describeCalls({}, 0)).toBe('?');
  });
});

describe('cycle bench: the idle window opens once the machine settled', () => {
  it('waits while fresh processes are still starting, opens on two close windows', () => {
    expect(settled([], 2)).toBe(false);
    expect(settled([480], 2)).toBe(false);
    // Start-up falling away: not settled.
    expect(settled([480, 210], 2)).toBe(false);
    expect(settled([480, 210, 110], 2)).toBe(false);
    // Two windows within a fifth: settled.
    expect(settled([480, 210, 110, 100], 2)).toBe(true);
    // Near zero, a couple of clock ticks' difference is not a trend.
    expect(settled([4, 20], 2)).toBe(true);
    expect(settled([4, 40], 2)).toBe(false);
    // A saturated machine reads alike twice: still starting.
    expect(settled([1_950, 1_990], 2)).toBe(false);
    expect(settled([450, 440], 2)).toBe(true);
    expect(settled([450, 440], 1)).toBe(false);
  });
});
