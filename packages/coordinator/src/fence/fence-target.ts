/**
 * The write target's fence, as the coordinator sees it: the port step (b) of a grant goes through.
 *
 * `advanceBatch` advances many resources in one durable commit at the sink. A refusal
 * (STALE_TOKEN: the fence is already past the token) is data in the result; a thrown
 * {@link SinkUnavailableError} means nothing is known (the advance may or may not have happened),
 * which the caller treats exactly like a refusal: no grant is sent.
 */
import { LeaseholdError } from '@leasehold/protocol';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import { SinkUnavailableError } from '../errors.js';

export interface AdvanceItem {
  readonly resource: string;
  readonly token: bigint;
}

export type AdvanceItemResult =
  | { readonly ok: true; readonly resource: string; readonly outcome: 'advanced' | 'unchanged'; readonly fence: bigint }
  | { readonly ok: false; readonly resource: string; readonly code: 'STALE_TOKEN'; readonly fence: bigint };

export interface FenceTarget {
  /** Results in the order of `items`. Throws {@link SinkUnavailableError} when the outcome is unknown. */
  advanceBatch(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]>;
  /** Cheap reachability probe for /readyz. */
  ping(): Promise<boolean>;
  /** Release connections (optional). */
  close?(): void;
}

export interface SinkFenceTargetOptions {
  readonly url: string;
  readonly key: string;
  readonly timeoutMs: number;
  /** For an https:// sink: its CA, pinned. */
  readonly tls?: TlsClientOptions;
}

/** Each SinkClient call carries at most this many advances (the protocol's batch limit). */
const MAX_BATCH = 1000;

/**
 * The sink's own {@link SinkClient}: POSTs the protocol's AdvanceBatchRequest to
 * `/v1/fences/advance-batch` with `Authorization: Bearer <coordinator key>`.
 */
export class SinkFenceTarget implements FenceTarget {
  readonly #client: SinkClient;

  constructor(options: SinkFenceTargetOptions) {
    this.#client = new SinkClient({
      url: options.url,
      key: options.key,
      timeoutMs: options.timeoutMs,
      ...(options.tls === undefined ? {} : { tls: options.tls }),
    });
  }

  async advanceBatch(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> {
    const out: AdvanceItemResult[] = [];
    for (let i = 0; i < items.length; i += MAX_BATCH) {
      const chunk = items.slice(i, i + MAX_BATCH);
      try {
        out.push(...(await this.#client.advanceBatch(chunk)));
      } catch (err) {
        const code = err instanceof LeaseholdError ? err.code : 'UNAVAILABLE';
        throw new SinkUnavailableError(`sink advance-batch failed: ${String(err)}`, { cause: err, code });
      }
    }
    return out;
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.#client.health()).ready;
    } catch {
      return false;
    }
  }

  close(): void {
    void this.#client.close();
  }
}
