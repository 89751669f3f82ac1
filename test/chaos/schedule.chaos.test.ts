/** The fault schedule is a pure function of its seed and the topology: replayable, bounded, varied. */
import { describe, expect, it } from 'vitest';
import { Prng } from './prng.js';
import { buildSchedule, describeNemesis, linkNames, type Topology } from './schedule.js';
import { parseWorkerLog } from './collect.js';
import { parseDuration } from './runner.js';

const topo: Topology = { etcdMembers: 3, coordinators: 2, workers: 4 };

describe('chaos schedule', () => {
  it('replays from its seed, and another seed gives another schedule', () => {
    const a = buildSchedule({ seed: 42, durationMs: 120_000 }, topo);
    expect(buildSchedule({ seed: 42, durationMs: 120_000 }, topo)).toEqual(a);
    expect(buildSchedule({ seed: 43, durationMs: 120_000 }, topo)).not.toEqual(a);
  });

  it('has a fault every ~5 s lasting 1–5 s, one at a time, at least 10 cycles in a minute', () => {
    const steps = buildSchedule({ seed: 7, durationMs: 60_000 }, topo);
    expect(steps.length).toBeGreaterThanOrEqual(10);
    for (const [i, s] of steps.entries()) {
      expect(s.durationMs).toBeGreaterThanOrEqual(1_000);
      expect(s.durationMs).toBeLessThanOrEqual(5_000);
      expect(s.atMs + s.durationMs).toBeLessThanOrEqual(60_000);
      const next = steps[i + 1];
      if (next !== undefined) expect(next.atMs).toBeGreaterThanOrEqual(s.atMs + s.durationMs);
    }
  });

  it('reaches every kind of nemesis and every part of the cluster over many seeds', () => {
    const seen = new Set<string>();
    for (let seed = 1; seed <= 40; seed++) {
      for (const s of buildSchedule({ seed, durationMs: 60_000 }, topo)) {
        const n = s.nemesis;
        if (n.kind === 'net') {
          seen.add(`net:${n.mode.kind}`);
          for (const l of n.links) seen.add(`link:${l}`);
        } else if (n.kind === 'pause' || n.kind === 'kill') {
          seen.add(`${n.kind}:${n.process}`);
        }
        expect(describeNemesis(n)).not.toBe('');
      }
    }
    for (const k of ['blackhole', 'one-way', 'reset', 'latency']) expect(seen).toContain(`net:${k}`);
    for (const p of ['sink', 'coordinator-0', 'worker-3', 'etcd-m2', 'etcd-leader']) {
      expect(seen).toContain(`pause:${p}`);
      expect(seen).toContain(`kill:${p}`);
    }
    for (const l of linkNames(topo)) expect(seen).toContain(`link:${l}`);
  });

  it('names a proxy for every link: workers to coordinators and sink, coordinators to sink and etcd, etcd peers', () => {
    const links = linkNames(topo);
    expect(links).toContain('worker-0->coordinator-1');
    expect(links).toContain('worker-3->sink');
    expect(links).toContain('coordinator-1->sink');
    expect(links).toContain('coordinator-0->etcd-m2');
    expect(links).toContain('etcd-peer->etcd-m1');
    expect(links).toHaveLength(4 * 3 + 2 * 4 + 3);
    expect(linkNames({ ...topo, etcdMembers: 1 }).some((l) => l.startsWith('etcd-peer'))).toBe(false);
  });

  it('the PRNG is seeded and stays in range', () => {
    const a = new Prng(1);
    const b = new Prng(1);
    const xs = Array.from({ length: 100 }, () => a.int(3, 9));
    expect(Array.from({ length: 100 }, () => b.int(3, 9))).toEqual(xs);
    expect(Math.min(...xs)).toBe(3);
    expect(Math.max(...xs)).toBe(8);
  });

  it('parses durations for the CLI', () => {
    expect(parseDuration('10m')).toBe(600_000);
    expect(parseDuration('90s')).toBe(90_000);
    expect(parseDuration('1500ms')).toBe(1_500);
    expect(parseDuration('2')).toBe(2_000);
    expect(() => parseDuration('ten')).toThrow(/not a duration/);
  });
});

describe('worker log parser', () => {
  const line = (o: object) => JSON.stringify({ level: 30, workerId: 'worker-1', ...o });
  const base = { taskId: 't1', resource: 'r/1', token: '7' };

  it('turns SDK and handler lines into grants, attempts, outcomes, completions and self-pauses', () => {
    const text = [
      line({ time: 1, msg: 'lease granted', ...base, attempt: 1 }),
      line({ time: 2, msg: 'chaos: write attempt', ...base, resultId: 'task:t1' }),
      line({ time: 3, msg: 'chaos: self-pause', ...base, pauseMs: 5000 }),
      line({ time: 5003, msg: 'chaos: write attempt', ...base, resultId: 'task:t1', resumed: true }),
      line({ time: 5010, msg: 'write refused by the sink', ...base, code: 'STALE_TOKEN', fence: '9' }),
      line({ time: 5011, msg: 'lease lost; task left to the next holder', ...base, reason: 'STALE_TOKEN' }),
      'not json',
    ].join('\n');
    const { events, selfPauses } = parseWorkerLog('worker-1', text);
    expect(events.map((e) => (e.kind === 'write' ? `write:${e.outcome}` : e.kind))).toEqual([
      'grant',
      'write-attempt',
      'write-attempt',
      'write:STALE_TOKEN',
      'lost',
    ]);
    expect(selfPauses).toEqual([{ kind: 'self-pause', targets: ['worker-1'], startMs: 3, endMs: 5003 }]);
  });

  it('an attempt with no outcome (timed out, killed) is an unknown write: it may have happened', () => {
    const text = [
      line({ time: 1, msg: 'lease granted', ...base }),
      line({ time: 2, msg: 'chaos: write attempt', ...base, resultId: 'task:t1' }),
      line({ time: 3, msg: 'handler failed; releasing the lease', ...base }),
    ].join('\n');
    const writes = parseWorkerLog('worker-1', text).events.filter((e) => e.kind === 'write');
    expect(writes).toEqual([expect.objectContaining({ outcome: 'unknown', token: '7', resultId: 'task:t1' })]);
  });
});
