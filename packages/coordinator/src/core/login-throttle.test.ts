import { describe, expect, it } from 'vitest';
import { addressKey, LoginThrottle } from './login-throttle.js';

const options = { freeAttempts: 3, initialMs: 1_000, maxMs: 8_000 };

/** Wrong keys from `address` at `nowMs` until one is refused; what each attempt got. */
function attempt(t: LoginThrottle, address: string, nowMs: number): string {
  const gate = t.check(address, nowMs);
  if (!gate.ok) return `locked ${gate.retryAfterMs}`;
  return `wrong, locked for ${t.failed(address, nowMs).lockedForMs}`;
}

describe('LoginThrottle', () => {
  it('free attempts, then a lock that doubles up to maxMs; a locked address is refused before its key is read', () => {
    const t = new LoginThrottle(options);
    const rows: [number, string][] = [
      [0, 'wrong, locked for 0'],
      [0, 'wrong, locked for 0'],
      [0, 'wrong, locked for 1000'],
      [999, 'locked 1'],
      [1_000, 'wrong, locked for 2000'],
      [2_000, 'locked 1000'],
      [3_000, 'wrong, locked for 4000'],
      [7_000, 'wrong, locked for 8000'],
      [15_000, 'wrong, locked for 8000'], // capped
    ];
    for (const [nowMs, expected] of rows) expect(attempt(t, '10.0.0.1', nowMs), `at ${nowMs}`).toBe(expected);
  });

  it('the first refusal of a lock is marked (logged), the rest are counted and reported with the next wrong key', () => {
    const t = new LoginThrottle({ ...options, freeAttempts: 2 });
    t.failed('10.0.0.1', 0);
    expect(t.failed('10.0.0.1', 0).lockedForMs).toBe(1_000);
    expect(t.check('10.0.0.1', 10)).toEqual({ ok: false, retryAfterMs: 990, first: true });
    expect(t.check('10.0.0.1', 20)).toEqual({ ok: false, retryAfterMs: 980, first: false });
    expect(t.check('10.0.0.1', 30)).toMatchObject({ first: false });
    expect(t.failed('10.0.0.1', 1_000)).toEqual({ failures: 3, lockedForMs: 2_000, refusedWhileLocked: 3 });
  });

  it('addresses are throttled apart; a correct key forgets one; so does maxMs without a wrong key', () => {
    const t = new LoginThrottle({ ...options, freeAttempts: 2 });
    t.failed('10.0.0.1', 0);
    t.failed('10.0.0.1', 0);
    expect(t.check('10.0.0.1', 0).ok).toBe(false);
    expect(t.check('10.0.0.2', 0).ok).toBe(true);
    t.succeeded('10.0.0.1');
    expect(t.check('10.0.0.1', 0).ok).toBe(true);
    t.failed('10.0.0.3', 0);
    t.failed('10.0.0.3', 0);
    expect(t.failed('10.0.0.3', 1_000).lockedForMs).toBe(2_000); // the count went on
    expect(t.failed('10.0.0.3', 3_000 + 8_000).lockedForMs).toBe(0); // forgotten: a free attempt again
  });

  it('remembers at most maxTracked addresses, dropping the least recently failed', () => {
    const t = new LoginThrottle({ ...options, freeAttempts: 2, maxTracked: 2 });
    for (const a of ['10.0.0.1', '10.0.0.2']) {
      t.failed(a, 0);
      t.failed(a, 0);
    }
    t.failed('10.0.0.3', 0);
    expect(t.tracked).toBe(2);
    expect(t.check('10.0.0.1', 0).ok).toBe(true);
    expect(t.check('10.0.0.2', 0).ok).toBe(false);
  });
});

describe('addressKey', () => {
  it.each([
    ['10.1.2.3', '10.1.2.3'],
    ['::ffff:10.1.2.3', '10.1.2.3'],
    ['::FFFF:10.1.2.3', '10.1.2.3'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['2001:db8:1:2::9', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:ffff:0:0:1', '2001:db8:1:2::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['64:ff9b::192.0.2.33', '64:ff9b:0:0::/64'],
    ['not-an-address', 'not-an-address'],
    ['1:2:3', '1:2:3'],
  ])('%s -> %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });

  it('one host rotating through its /64 is one address to the throttle', () => {
    const t = new LoginThrottle({ ...options, freeAttempts: 2 });
    t.failed('2001:db8:1:2::1', 0);
    t.failed('2001:db8:1:2::2', 0);
    expect(t.check('2001:db8:1:2:ffff:ffff:ffff:ffff', 10).ok).toBe(false);
    expect(t.check('2001:db8:1:3::1', 10).ok).toBe(true);
  });
});
