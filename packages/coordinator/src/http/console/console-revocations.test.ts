/**
 * ConsoleRevocations over a fake store (the narrow ConsoleRevocationStore port): fail closed until
 * the set is read and while the watch is lost, revocations of peers applied from the watch,
 * expired ones dropped, listeners told once per login.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ConsoleRevocation, ConsoleRevocationListener, ConsoleRevocationStore } from '../../store/port.js';
import { ConsoleRevocations } from './console-revocations.js';

class FakeStore implements ConsoleRevocationStore {
  readonly stored: ConsoleRevocation[] = [];
  listener: ConsoleRevocationListener | undefined;
  reads = 0;
  failWrites = false;

  revokeConsoleSession(revocation: ConsoleRevocation) {
    if (this.failWrites) return Promise.reject(new Error('etcd down'));
    this.stored.push(revocation);
    this.listener?.onRevoked([revocation]);
    return Promise.resolve({ kind: 'revoked' as const, revision: BigInt(this.stored.length) });
  }

  consoleRevocations() {
    this.reads += 1;
    return Promise.resolve({ revocations: [...this.stored], revision: BigInt(this.stored.length) });
  }

  watchConsoleRevocations(_from: bigint, listener: ConsoleRevocationListener) {
    this.listener = listener;
    return Promise.resolve({ cancel: () => Promise.resolve() });
  }
}

const NOW = 1_000_000;
const log = pino({ level: 'silent' });

describe('ConsoleRevocations', () => {
  it('refuses every login until the set is read; then only the revoked ones', async () => {
    const store = new FakeStore();
    store.stored.push({ loginId: 'old', expiresAtMs: NOW + 60_000 });
    const r = new ConsoleRevocations({ store, wallClock: () => NOW, log });
    expect(r.accepts('any')).toBe(false);
    await r.start();
    expect(r.accepts('any')).toBe(true);
    expect(r.accepts('old')).toBe(false);
    await r.close();
  });

  it("a peer's logout arrives through the watch; listeners hear each login once", async () => {
    const store = new FakeStore();
    const r = new ConsoleRevocations({ store, wallClock: () => NOW, log });
    await r.start();
    const heard: string[] = [];
    r.onRevoked((id) => heard.push(id));
    store.listener?.onRevoked([{ loginId: 'peer', expiresAtMs: NOW + 1_000 }]);
    expect(r.accepts('peer')).toBe(false);
    await r.revoke({ loginId: 'mine', expiresAtMs: NOW + 1_000 }); // also echoed by the watch
    expect(heard).toEqual(['peer', 'mine']);
    // Already expired: nothing to refuse (the cookie is refused by its expiry).
    store.listener?.onRevoked([{ loginId: 'stale', expiresAtMs: NOW - 1 }]);
    expect(heard).toEqual(['peer', 'mine']);
    await r.close();
  });

  it('a lost watch closes the console until the set is read again', async () => {
    const store = new FakeStore();
    const r = new ConsoleRevocations({ store, wallClock: () => NOW, log });
    await r.start();
    store.listener?.onError(new Error('compacted'));
    expect(r.accepts('any')).toBe(false);
    await expect.poll(() => r.accepts('any'), { timeout: 2_000 }).toBe(true);
    expect(store.reads).toBe(2);
    await r.close();
  });

  it('a logout that cannot be recorded is refused here anyway, and says so', async () => {
    const store = new FakeStore();
    const r = new ConsoleRevocations({ store, wallClock: () => NOW, log });
    await r.start();
    store.failWrites = true;
    await expect(r.revoke({ loginId: 'x', expiresAtMs: NOW + 1_000 })).rejects.toThrow('etcd down');
    expect(r.accepts('x')).toBe(false);
    await r.close();
  });

  it('without a store: this process alone, ready at once', async () => {
    const r = new ConsoleRevocations({ store: undefined, wallClock: () => NOW, log });
    expect(r.accepts('a')).toBe(true);
    await r.revoke({ loginId: 'a', expiresAtMs: NOW + 1_000 });
    expect(r.accepts('a')).toBe(false);
  });
});
