import { describe, expect, it } from 'vitest';
import { QueueLanes } from './index-queues.js';

describe('QueueLanes', () => {
  it('makes a lane on first use and only for a priority it has', () => {
    const lanes = new QueueLanes('q');
    expect(lanes.laneAt(3)).toBeUndefined();
    const lane = lanes.lane(3);
    expect(lanes.laneAt(3)).toBe(lane);
    expect(lanes.lane(QueueLanes.PRIORITIES - 1)).toBeDefined();
    // A lane past the top would hold tasks that selection never visits: refused, not made.
    for (const p of [QueueLanes.PRIORITIES, -1, 1.5]) expect(() => lanes.lane(p)).toThrow(RangeError);
    expect(lanes.laneAt(QueueLanes.PRIORITIES)).toBeUndefined();
  });
});
