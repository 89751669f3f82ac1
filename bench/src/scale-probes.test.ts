/**
 * The scale suite's pure parts: the checked warm-up of a one-shot job's rate, and reading "the
 * index holds N tasks" from the coordinator's task gauge whatever states it reports.
 */
import { describe, expect, it } from 'vitest';
import { openTasksOf, parseTaskGauge, steadyRate } from './scale-probes.js';

describe('steadyRate', () => {
  it('drops seconds until two in a row agree within 10 %, and the last partial second', () => {
    // 1 s ramping up, then steady around 1000/s, then a partial last second.
    const r = steadyRate([200, 700, 990, 1000, 1010, 1000, 300]);
    expect(r.steady).toBe(true);
    expect(r.warmupSeconds).toBe(4);
    expect(r.rate).toBe(1005);
  });

  it('never steady: the whole run, and says so', () => {
    const r = steadyRate([100, 300, 900]);
    expect(r).toEqual({ rate: 1300 / 3, steady: false, warmupSeconds: 0 });
  });
});

describe('parseTaskGauge', () => {
  it("reads main's gauge and counts pending, delayed and leased as open", () => {
    const text = [
      '# HELP leasehold_coordinator_tasks Tasks by state',
      '# TYPE leasehold_coordinator_tasks gauge',
      'leasehold_coordinator_tasks{state="pending"} 990',
      'leasehold_coordinator_tasks{state="delayed"} 7',
      'leasehold_coordinator_tasks{state="leased"} 3',
      'leasehold_coordinator_tasks{state="failed"} 5',
      'leasehold_coordinator_tasks_total 1',
    ].join('\n');
    const g = parseTaskGauge(text);
    expect(g).toEqual({ pending: 990, delayed: 7, leased: 3, failed: 5 });
    expect(openTasksOf(g ?? {})).toBe(1_000);
  });

  it('takes other labels and new states in its stride; no gauge at all is undefined', () => {
    const g = parseTaskGauge(
      [
        'leasehold_coordinator_tasks{coordinator="a",state="pending"} 4',
        'leasehold_coordinator_tasks{coordinator="b",state="pending"} 2',
        'leasehold_coordinator_tasks{state="completed"} 9',
      ].join('\n'),
    );
    expect(g).toEqual({ pending: 6, completed: 9 });
    expect(openTasksOf(g ?? {})).toBe(6);
    expect(parseTaskGauge('leasehold_coordinator_sessions 2\n')).toBeUndefined();
  });
});
