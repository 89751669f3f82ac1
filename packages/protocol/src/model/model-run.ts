/**
 * Runs a sequence of actions against the model (lease table + fenced store) the way a cluster
 * would see them — several workers, several resources, clock jumps, pauses (a worker simply goes
 * quiet and later writes with the token it still holds), retries, restarts — and checks, with the
 * checker's own bookkeeping (never trusting the system under test), the safety invariants:
 *
 * - `write-token-regressed`: per resource, accepted writes never go back in token;
 * - `stale-write-accepted`: after an advance to T, no write with token < T is accepted;
 * - `unissued-token-accepted`: a token no grant advanced to is never accepted;
 * - `two-live-owners`: at most one live owner per resource;
 * - `foreign-fence-moved`: another resource's takeover never changes this resource's fence;
 * - `renew-after-deadline`: a renew at or after the deadline is always refused;
 * - `result-changed`: a stored result never changes payload.
 *
 * Used by the fast-check properties; the same checks run against deliberately broken variants to
 * prove they can fail.
 */
import type { Clock } from './clock.js';
import { decideAdvance, decideWrite } from './fence-rules.js';
import { FencedStore, type FenceRules } from './fenced-store.js';
import { LeaseTable, type Lease, type LeaseTableOptions } from './lease-table.js';
import { SequenceAllocator } from './token-allocator.js';

export type Action =
  | { readonly kind: 'acquire'; readonly worker: number; readonly resource: number }
  | { readonly kind: 'retry-acquire'; readonly worker: number }
  | { readonly kind: 'renew'; readonly worker: number; readonly resource: number }
  | { readonly kind: 'release'; readonly worker: number; readonly resource: number }
  | { readonly kind: 'write'; readonly worker: number; readonly resource: number; readonly variant: number }
  | { readonly kind: 'rogue-write'; readonly resource: number; readonly ahead: number }
  | { readonly kind: 'tick'; readonly ms: number }
  | { readonly kind: 'expire' }
  | { readonly kind: 'restart' };

export type ViolationKind =
  | 'write-token-regressed'
  | 'stale-write-accepted'
  | 'unissued-token-accepted'
  | 'two-live-owners'
  | 'foreign-fence-moved'
  | 'renew-after-deadline'
  | 'result-changed';

export interface Violation {
  readonly kind: ViolationKind;
  readonly step: number;
  readonly detail: string;
}

/** Something that behaves like a lease table (the real one, or a deliberately broken one). */
export interface LeaseTableLike {
  acquire: LeaseTable['acquire'];
  renew: LeaseTable['renew'];
  release: LeaseTable['release'];
  expire: LeaseTable['expire'];
}

export interface ModelRunOptions {
  readonly ttlMs: number;
  readonly fenceOnExpiry: boolean;
  readonly rules?: FenceRules;
  readonly makeTable?: (opts: LeaseTableOptions) => LeaseTableLike;
}

interface Held {
  lease: Lease;
  /** The checker's own view of the deadline: grant/renew time + TTL. */
  deadlineMs: number;
  released: boolean;
}

export function runModel(actions: readonly Action[], opts: ModelRunOptions): Violation[] {
  // The checker's own time (the model is judged by the clock it is handed; only this run moves it).
  let nowMs = 0;
  const clock: Clock & { advance(ms: number): void } = {
    nowMs: () => nowMs,
    advance: (ms) => {
      nowMs += ms;
    },
  };
  const store = new FencedStore(opts.rules ?? { decideAdvance, decideWrite });
  const allocator = new SequenceAllocator();
  const makeTable = opts.makeTable ?? ((o: LeaseTableOptions) => new LeaseTable(o));
  const tableOptions = { clock, allocator, fences: store, ttlMs: opts.ttlMs, fenceOnExpiry: opts.fenceOnExpiry };
  let table = makeTable(tableOptions);

  const violations: Violation[] = [];
  const held = new Map<string, Held>(); // `${worker}/${resource}` -> the worker's latest grant
  const lastRequest = new Map<number, { id: string; resource: string }>();
  const issued = new Map<string, bigint>(); // resource -> highest token a grant/fence-on-expiry advanced to
  const lastAccepted = new Map<string, bigint>();
  const firstPayload = new Map<string, string>();
  let step = 0;
  let requestSeq = 0;

  const flag = (kind: ViolationKind, detail: string) => violations.push({ kind, step, detail });
  const res = (i: number) => `r${i}`;
  const owner = (w: number) => ({ workerId: `w${w}`, incarnation: 'i1' });
  const liveOwners = (resource: string) =>
    [...held.values()].filter((h) => h.lease.resource === resource && !h.released && clock.nowMs() < h.deadlineMs);
  const fences = () => new Map(['r0', 'r1', 'r2', 'r3'].map((r) => [r, store.fenceOf(r)]));

  const noteIssued = (resource: string, token: bigint) => {
    if (token > (issued.get(resource) ?? 0n)) issued.set(resource, token);
  };

  const onGrant = (worker: number, lease: Lease, replayed: boolean, before: Map<string, bigint>) => {
    if (replayed) return;
    for (const other of liveOwners(lease.resource)) {
      if (other.lease.workerId !== lease.workerId || other.lease.token !== lease.token) {
        flag(
          'two-live-owners',
          `${lease.resource}: ${other.lease.workerId}@${other.lease.token} and ${lease.workerId}@${lease.token}`,
        );
      }
    }
    for (const [r, f] of fences()) {
      if (r !== lease.resource && before.get(r) !== f)
        flag('foreign-fence-moved', `${r} moved by takeover of ${lease.resource}`);
    }
    noteIssued(lease.resource, lease.token);
    held.set(`${worker}/${lease.resource}`, { lease, deadlineMs: clock.nowMs() + opts.ttlMs, released: false });
  };

  for (const action of actions) {
    step += 1;
    switch (action.kind) {
      case 'acquire':
      case 'retry-acquire': {
        const worker = action.worker;
        let request = lastRequest.get(worker);
        if (action.kind === 'acquire' || request === undefined) {
          const resource = action.kind === 'acquire' ? res(action.resource) : 'r0';
          request = { id: `q${++requestSeq}`, resource };
          lastRequest.set(worker, request);
        }
        const before = fences();
        const result = table.acquire({ resource: request.resource, requestId: request.id, ...owner(worker) });
        if (result.ok) onGrant(worker, result.lease, result.replayed, before);
        break;
      }
      case 'renew': {
        const h = held.get(`${action.worker}/${res(action.resource)}`);
        if (h === undefined) break;
        const result = table.renew({ resource: h.lease.resource, token: h.lease.token, ...owner(action.worker) });
        if (result.ok) {
          if (!(clock.nowMs() < h.deadlineMs) || h.released) {
            flag(
              'renew-after-deadline',
              `${h.lease.resource}@${h.lease.token} renewed at ${clock.nowMs()} >= ${h.deadlineMs}`,
            );
          }
          h.deadlineMs = clock.nowMs() + opts.ttlMs;
        }
        break;
      }
      case 'release': {
        const h = held.get(`${action.worker}/${res(action.resource)}`);
        if (h === undefined) break;
        const result = table.release({ resource: h.lease.resource, token: h.lease.token, ...owner(action.worker) });
        if (result.ok) h.released = true;
        break;
      }
      case 'write':
      case 'rogue-write': {
        const resource = res(action.resource);
        let token: bigint;
        let payload: string;
        if (action.kind === 'write') {
          const h = held.get(`${action.worker}/${resource}`);
          if (h === undefined) break;
          token = h.lease.token;
          payload = `p${action.variant}`;
        } else {
          token = store.fenceOf(resource) + BigInt(action.ahead);
          payload = 'rogue';
        }
        const resultId = `task-${resource}`;
        const decision = store.write(resource, token, resultId, payload);
        if (!decision.ok) break;
        const last = lastAccepted.get(resource) ?? 0n;
        if (token < last) flag('write-token-regressed', `${resource}: accepted ${token} after ${last}`);
        lastAccepted.set(resource, token > last ? token : last);
        const maxIssued = issued.get(resource) ?? 0n;
        if (token < maxIssued)
          flag('stale-write-accepted', `${resource}: accepted ${token} after advance to ${maxIssued}`);
        if (token > maxIssued)
          flag('unissued-token-accepted', `${resource}: accepted ${token}, highest issued ${maxIssued}`);
        const key = `${resource}/${resultId}`;
        const canonical = JSON.stringify(payload);
        const first = firstPayload.get(key);
        if (first === undefined) firstPayload.set(key, canonical);
        else if (first !== canonical) flag('result-changed', `${key}: ${first} then ${canonical} accepted`);
        break;
      }
      case 'tick':
        clock.advance(action.ms);
        break;
      case 'expire':
        for (const e of table.expire()) if (e.fencedTo !== undefined) noteIssued(e.lease.resource, e.fencedTo);
        break;
      case 'restart':
        // A restart takes at least one TTL (as a real coordinator waits out leases it cannot see);
        // the new table starts empty but shares the durable store and allocator.
        clock.advance(opts.ttlMs);
        table = makeTable(tableOptions);
        break;
    }
  }
  return violations;
}
