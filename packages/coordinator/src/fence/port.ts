/**
 * The write target's fence, as the coordinator sees it: the port step (b) of a grant goes through
 * (the adapter to the sink's HTTP API is `sink-fence-target.ts`; tests pass in-memory fences).
 *
 * `advanceBatch` advances many resources in one durable commit at the sink. A refusal
 * (STALE_TOKEN: the fence is already past the token) is data in the result; a thrown
 * `SinkUnavailableError` means nothing is known (the advance may or may not have happened),
 * which the caller treats exactly like a refusal: no grant is sent.
 */
import type { CapabilitySigningKey, SinkEvent } from '@leasehold/protocol';

export interface AdvanceItem {
  readonly resource: string;
  readonly token: bigint;
  /**
   * The grant the advance is made for: who it goes to and the capability it carries. A target
   * that can may vouch for it (`signVouch`), so the sink skips verifying that capability on the
   * grant's writes; a target that cannot ignores it. Fence-on-expiry advances have none.
   */
  readonly grant?: AdvanceGrantFacts;
}

export interface AdvanceGrantFacts {
  readonly workerId: string;
  readonly incarnation: string;
  readonly capability: string;
}

export type AdvanceItemResult =
  | { readonly ok: true; readonly resource: string; readonly outcome: 'advanced' | 'unchanged'; readonly fence: bigint }
  | { readonly ok: false; readonly resource: string; readonly code: 'STALE_TOKEN'; readonly fence: bigint };

/** What the readiness probe learnt of the sink. */
export type SinkProbe =
  | { readonly state: 'ok' }
  /** No answer (down, wrong URL, TLS): a grant cannot be made now; config may or may not be wrong. */
  | { readonly state: 'unreachable'; readonly detail: string }
  /** The sink refused the coordinator key (SINK_KEY). */
  | { readonly state: 'unauthenticated'; readonly detail: string }
  /** The sink would refuse the capabilities this coordinator signs (its public key is not in CAPABILITY_PUBLIC_KEYS). */
  | { readonly state: 'capability-mismatch'; readonly detail: string };

export interface FenceTarget {
  /** Results in the order of `items`. Throws `SinkUnavailableError` when the outcome is unknown. */
  advanceBatch(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]>;
  /** Cheap reachability probe. */
  ping(): Promise<boolean>;
  /**
   * Readiness: an authenticated no-op at the sink (proves the coordinator key) carrying a capability
   * signed with `key` (the sink says whether it would accept it). Never throws.
   */
  probe?(key: CapabilitySigningKey): Promise<SinkProbe>;
  /** Release connections (optional). */
  close?(): void;
}

/**
 * What the console's read model learns from the sink, besides the fence it advances: the sink's
 * event stream (decisions and refusals) and the fence of a resource on demand. The adapter over
 * HTTP is `sink-observer.ts`.
 */
export interface SinkObserver {
  /** The sink's events from now on, reconnecting, until `signal` aborts. */
  events(options: {
    readonly signal: AbortSignal;
    readonly onConnected: () => void;
    readonly onDisconnected: (info: { readonly error: unknown; readonly retryInMs: number }) => void;
  }): AsyncIterable<SinkEvent>;
  /** The resource's fence at the sink now. */
  fenceOf(resource: string): Promise<bigint>;
  close(): Promise<void>;
}
