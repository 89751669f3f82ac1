/**
 * Console login attempts, limited per client address with backoff: pure decisions (the caller
 * gives the time), one instance per coordinator.
 *
 * - An address has `freeAttempts` wrong keys; the last of them and each one after locks the
 *   address for a backoff that doubles (the protocol's one backoff: `initialMs · 2^(n−1)`, at most
 *   `maxMs`).
 * - While locked, every attempt from the address is refused before the key is looked at — a
 *   correct key too, or the lock would not slow a guesser down — with how long is left.
 * - A correct key (outside a lock) forgets the address. So does `maxMs` without a wrong key once
 *   its lock has ended.
 * - An address is the IPv4 address, or the /64 of an IPv6 address (one host picks freely among
 *   the 2^64 addresses of its own network; IPv4-mapped IPv6 counts as IPv4).
 * - At most `maxTracked` addresses are remembered; past that the least recently failed is
 *   forgotten first (a flood of addresses costs bounded memory).
 */
import { retryDelayMs, type Backoff } from '@leasehold/protocol';

export interface LoginThrottleOptions {
  readonly freeAttempts: number;
  readonly initialMs: number;
  readonly maxMs: number;
  /** Addresses remembered at once. Default 10 000. */
  readonly maxTracked?: number;
}

export type LoginGate =
  | { readonly ok: true }
  | {
      readonly ok: false;
      readonly retryAfterMs: number;
      /** First refusal of this lock (log it; the later ones are counted, see `refusedWhileLocked`). */
      readonly first: boolean;
    };

export interface LoginFailure {
  /** Wrong keys from this address since it was last forgotten. */
  readonly failures: number;
  /** 0 while attempts are left; else how long the address is now locked. */
  readonly lockedForMs: number;
  /** Attempts refused during the locks since the previous wrong key. */
  readonly refusedWhileLocked: number;
}

interface Entry {
  failures: number;
  lockedUntilMs: number;
  lastFailureMs: number;
  refused: number;
}

export class LoginThrottle {
  readonly #o: Required<LoginThrottleOptions>;
  readonly #backoff: Backoff;
  /** In least-recently-failed order (re-inserted on each failure). */
  readonly #entries = new Map<string, Entry>();

  constructor(options: LoginThrottleOptions) {
    this.#o = { maxTracked: 10_000, ...options };
    this.#backoff = { initialMs: options.initialMs, multiplier: 2, maxMs: options.maxMs, jitter: 0 };
  }

  get tracked(): number {
    return this.#entries.size;
  }

  /** May an attempt from `address` be checked now? */
  check(address: string, nowMs: number): LoginGate {
    const key = addressKey(address);
    const entry = this.#live(key, nowMs);
    if (entry === undefined || entry.lockedUntilMs <= nowMs) return { ok: true };
    entry.refused += 1;
    return { ok: false, retryAfterMs: entry.lockedUntilMs - nowMs, first: entry.refused === 1 };
  }

  /** A wrong key from `address` (after `check` allowed it). */
  failed(address: string, nowMs: number): LoginFailure {
    const key = addressKey(address);
    const entry = this.#live(key, nowMs) ?? { failures: 0, lockedUntilMs: 0, lastFailureMs: nowMs, refused: 0 };
    entry.failures += 1;
    entry.lastFailureMs = nowMs;
    const over = entry.failures - this.#o.freeAttempts + 1;
    const lockedForMs = over > 0 ? retryDelayMs(this.#backoff, over, () => 0) : 0;
    entry.lockedUntilMs = nowMs + lockedForMs;
    const refusedWhileLocked = entry.refused;
    entry.refused = 0;
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    while (this.#entries.size > this.#o.maxTracked) {
      const oldest = this.#entries.keys().next();
      if (oldest.done === true) break;
      this.#entries.delete(oldest.value);
    }
    return { failures: entry.failures, lockedForMs, refusedWhileLocked };
  }

  /** A correct key from `address`: its failures are forgotten. */
  succeeded(address: string): void {
    this.#entries.delete(addressKey(address));
  }

  /** The entry of `key`, unless `maxMs` passed since its last failure's lock ended (then it is forgotten). */
  #live(key: string, nowMs: number): Entry | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (nowMs >= Math.max(entry.lastFailureMs, entry.lockedUntilMs) + this.#o.maxMs) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }
}

/** The throttled unit of a client address: IPv4 as is, IPv6 by its /64 (see the header). */
export function addressKey(address: string): string {
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  if (!address.includes(':')) return address;
  const groups = ipv6Groups(address);
  return groups === undefined ? address : `${groups.slice(0, 4).join(':')}::/64`;
}

/** The 8 groups of an IPv6 address (lower-case hex, no leading zeros), or undefined if it is not one. */
function ipv6Groups(address: string): string[] | undefined {
  const bare = address.split('%', 1)[0] ?? '';
  const halves = bare.split('::');
  if (halves.length > 2) return undefined;
  const parse = (part: string | undefined): string[] => (part === undefined || part === '' ? [] : part.split(':'));
  const head = parse(halves[0]);
  const tail = parse(halves[1]);
  const last = tail.length > 0 ? tail : head;
  const v4 = last.at(-1)?.includes('.') === true ? last.pop() : undefined;
  if (v4 !== undefined) {
    const octets = v4.split('.').map(Number);
    if (octets.length !== 4 || octets.some((o) => !Number.isInteger(o) || o < 0 || o > 255)) return undefined;
    const [a = 0, b = 0, c = 0, d = 0] = octets;
    last.push(((a << 8) | b).toString(16), ((c << 8) | d).toString(16));
  }
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const groups = [...head, ...Array<string>(halves.length === 1 ? 0 : missing).fill('0'), ...tail];
  if (groups.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return undefined;
  return groups.map((g) => parseInt(g, 16).toString(16));
}
