import { ManualClock } from '@leasehold/testing/clock';
import { describe, expect, it } from 'vitest';
import { SessionTable } from './session-table.js';

const TTL = 1_000;

function table(start = 10_000) {
  const clock = new ManualClock(start);
  return { clock, t: new SessionTable(clock, TTL) };
}

describe('SessionTable', () => {
  it('opens a session with deadline now + ttl', () => {
    const { t } = table();
    expect(t.open('s')).toBe(11_000);
    expect(t.isLive('s')).toBe(true);
    expect(t.remainingMs('s')).toBe(TTL);
  });

  // Transition table: [heartbeat at offset from open, expected ok, expected deadline]
  const heartbeats: [string, number, boolean, number | undefined][] = [
    ['immediately', 0, true, 11_000],
    ['half way', 500, true, 11_500],
    ['1 ms before the deadline', 999, true, 11_999],
    ['exactly at the deadline', 1_000, false, undefined],
    ['after the deadline', 1_500, false, undefined],
  ];
  it.each(heartbeats)('heartbeat %s', (_name, offset, ok, deadline) => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(offset);
    const beat = t.heartbeat('s');
    expect(beat.ok).toBe(ok);
    if (beat.ok) {
      expect(beat.deadlineMs).toBe(deadline);
      expect(beat.ttlMs).toBe(TTL);
    } else {
      expect(beat).toEqual({ ok: false, code: 'SESSION_EXPIRED', reason: 'deadline' });
    }
  });

  it('never revives: after a refused heartbeat every later one is refused too', () => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(TTL);
    expect(t.heartbeat('s').ok).toBe(false);
    expect(t.heartbeat('s', 10_001).ok).toBe(false); // received earlier, decided late: still refused
    expect(t.isLive('s')).toBe(false);
    expect(t.takeDue()).toEqual(['s']);
    clock.advance(1);
    expect(t.heartbeat('s').ok).toBe(false);
  });

  it('a heartbeat received in time but decided at the deadline is refused', () => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(TTL);
    expect(t.heartbeat('s', 10_500).ok).toBe(false);
  });

  it('counts a heartbeat from when it was received, not later', () => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(600);
    const beat = t.heartbeat('s', 10_200);
    expect(beat).toEqual({ ok: true, deadlineMs: 11_200, ttlMs: 600 });
  });

  it('never moves a deadline backwards', () => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(800);
    t.heartbeat('s');
    expect(t.heartbeat('s', 10_100)).toMatchObject({ ok: true, deadlineMs: 11_800 });
  });

  it('takeDue moves sessions at or past their deadline to ending, once', () => {
    const { clock, t } = table();
    t.open('a');
    clock.advance(100);
    t.open('b');
    clock.advance(899);
    expect(t.takeDue()).toEqual([]);
    clock.advance(1);
    expect(t.takeDue()).toEqual(['a']);
    expect(t.phaseOf('a')).toBe('ending');
    expect(t.takeDue()).toEqual([]);
    expect(t.nextDeadlineMs()).toBe(11_100);
    clock.advance(100);
    expect(t.takeDue()).toEqual(['b']);
    expect(t.nextDeadlineMs()).toBeUndefined();
  });

  it('refuses heartbeats of unknown, ending and ended sessions', () => {
    const { t } = table();
    expect(t.heartbeat('nope')).toEqual({ ok: false, code: 'SESSION_EXPIRED', reason: 'unknown-session' });
    t.open('s');
    expect(t.beginEnding('s')).toBe(true);
    expect(t.beginEnding('s')).toBe(false);
    expect(t.heartbeat('s').ok).toBe(false);
    t.markEnded('s');
    expect(t.phaseOf('s')).toBe('ended');
    expect(t.heartbeat('s').ok).toBe(false);
    expect(t.remainingMs('s')).toBe(0);
    t.remove('s');
    expect(t.phaseOf('s')).toBeUndefined();
  });

  it('re-opening (adoption) starts a fresh deadline', () => {
    const { clock, t } = table();
    t.open('s');
    clock.advance(900);
    expect(t.open('s')).toBe(11_900);
    expect(t.liveCount()).toBe(1);
  });

  it('rejects a non-positive ttl', () => {
    expect(() => new SessionTable(new ManualClock(), 0)).toThrow(RangeError);
  });
});
