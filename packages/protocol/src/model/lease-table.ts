/**
 * The lease table of the design note: per-resource ownership with deadlines judged by the
 * table's own (injected, monotonic) clock, tokens from a trusted allocator, and fence-before-grant.
 *
 * Rules:
 * - acquire is refused while another valid lease exists (now < deadline);
 * - before a grant, the fence at the write target is advanced to the new token; if that advance
 *   is refused, nothing is granted;
 * - acquire is idempotent by request id: a retry returns the recorded grant, never a second one;
 * - renew must match owner (worker id + incarnation) and token, and now < deadline: a renew exactly
 *   at the deadline is refused, and an expired lease is never revived;
 * - expiry alone does not move the fence (the old holder's write can still land) unless
 *   `fenceOnExpiry` is set, in which case {@link LeaseTable.expire} advances it.
 */
import type { Clock } from './clock.js';
import type { FenceAdvancer } from './fenced-store.js';
import type { TokenAllocator } from './token-allocator.js';

export interface Owner {
  readonly workerId: string;
  readonly incarnation: string;
}

export interface Lease extends Owner {
  readonly resource: string;
  readonly token: bigint;
  readonly requestId: string;
  readonly grantedAtMs: number;
  readonly deadlineMs: number;
}

export type AcquireResult =
  | { readonly ok: true; readonly lease: Lease; readonly replayed: boolean }
  | { readonly ok: false; readonly code: 'LEASE_HELD'; readonly holder: Owner; readonly remainingMs: number }
  | { readonly ok: false; readonly code: 'STALE_TOKEN'; readonly fence: bigint };

export type RenewResult =
  { readonly ok: true; readonly lease: Lease } | { readonly ok: false; readonly code: 'NOT_HOLDER' | 'LEASE_EXPIRED' };

export type ReleaseResult = { readonly ok: true } | { readonly ok: false; readonly code: 'NOT_HOLDER' };

export interface ExpiredLease {
  readonly lease: Lease;
  /** Set in fence-on-expiry mode: the token the fence was advanced to. */
  readonly fencedTo?: bigint;
}

export interface LeaseTableOptions {
  readonly clock: Clock;
  readonly allocator: TokenAllocator;
  readonly fences: FenceAdvancer;
  readonly ttlMs: number;
  readonly fenceOnExpiry?: boolean;
}

export interface AcquireRequest extends Owner {
  readonly resource: string;
  readonly requestId: string;
}

export interface HeldLeaseRef extends Owner {
  readonly resource: string;
  readonly token: bigint;
}

export class LeaseTable {
  readonly #opts: LeaseTableOptions;
  readonly #leases = new Map<string, Lease>();
  /** requestId -> grant, so a retried acquire gets the same grant. */
  readonly #grants = new Map<string, Lease>();

  constructor(opts: LeaseTableOptions) {
    if (!(opts.ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    this.#opts = opts;
  }

  acquire(req: AcquireRequest): AcquireResult {
    const recorded = this.#grants.get(req.requestId);
    if (recorded !== undefined) return { ok: true, lease: recorded, replayed: true };

    const now = this.#opts.clock.nowMs();
    const current = this.#leases.get(req.resource);
    if (current !== undefined && now < current.deadlineMs) {
      return {
        ok: false,
        code: 'LEASE_HELD',
        holder: { workerId: current.workerId, incarnation: current.incarnation },
        remainingMs: current.deadlineMs - now,
      };
    }

    const token = this.#opts.allocator.next();
    // Fence before grant: the target must refuse every older token before the new holder exists.
    const advanced = this.#opts.fences.advance(req.resource, token);
    if (!advanced.ok) return { ok: false, code: 'STALE_TOKEN', fence: advanced.fence };

    const lease: Lease = {
      resource: req.resource,
      token,
      workerId: req.workerId,
      incarnation: req.incarnation,
      requestId: req.requestId,
      grantedAtMs: now,
      deadlineMs: now + this.#opts.ttlMs,
    };
    this.#leases.set(req.resource, lease);
    this.#grants.set(req.requestId, lease);
    return { ok: true, lease, replayed: false };
  }

  renew(ref: HeldLeaseRef): RenewResult {
    const current = this.#match(ref);
    if (current === undefined) return { ok: false, code: 'NOT_HOLDER' };
    const now = this.#opts.clock.nowMs();
    if (!(now < current.deadlineMs)) return { ok: false, code: 'LEASE_EXPIRED' };
    const renewed: Lease = { ...current, deadlineMs: now + this.#opts.ttlMs };
    this.#leases.set(ref.resource, renewed);
    return { ok: true, lease: renewed };
  }

  /** Give the lease up. The fence is not moved: the next holder's grant moves it. */
  release(ref: HeldLeaseRef): ReleaseResult {
    if (this.#match(ref) === undefined) return { ok: false, code: 'NOT_HOLDER' };
    this.#leases.delete(ref.resource);
    return { ok: true };
  }

  /**
   * Remove leases whose deadline has passed. With `fenceOnExpiry`, also advance each one's fence
   * to a fresh token, so the expired holder's writes are refused before anyone takes over.
   */
  expire(): ExpiredLease[] {
    const now = this.#opts.clock.nowMs();
    const expired: ExpiredLease[] = [];
    for (const lease of [...this.#leases.values()]) {
      if (now < lease.deadlineMs) continue;
      this.#leases.delete(lease.resource);
      if (this.#opts.fenceOnExpiry === true) {
        const token = this.#opts.allocator.next();
        const advanced = this.#opts.fences.advance(lease.resource, token);
        expired.push(advanced.ok ? { lease, fencedTo: token } : { lease });
      } else {
        expired.push({ lease });
      }
    }
    return expired;
  }

  /** The live lease of a resource (now < deadline), if any. */
  holderOf(resource: string): Lease | undefined {
    const lease = this.#leases.get(resource);
    return lease !== undefined && this.#opts.clock.nowMs() < lease.deadlineMs ? lease : undefined;
  }

  #match(ref: HeldLeaseRef): Lease | undefined {
    const current = this.#leases.get(ref.resource);
    if (current === undefined) return undefined;
    const same =
      current.workerId === ref.workerId && current.incarnation === ref.incarnation && current.token === ref.token;
    return same ? current : undefined;
  }
}
