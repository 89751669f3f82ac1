/**
 * The write target's fence, as the coordinator sees it: the port step (b) of a grant goes through.
 *
 * `advanceBatch` advances many resources in one durable commit at the sink. A refusal
 * (STALE_TOKEN: the fence is already past the token) is data in the result; a thrown
 * {@link SinkUnavailableError} means nothing is known (the advance may or may not have happened),
 * which the caller treats exactly like a refusal: no grant is sent.
 */
import {
  AdvanceBatchResponseSchema,
  ErrorMessageSchema,
  isErrorCode,
  parseFence,
  type AdvanceBatchRequest,
} from '@leasehold/protocol';
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
}

export interface HttpFenceTargetOptions {
  readonly url: string;
  readonly key: string;
  readonly timeoutMs: number;
}

const MAX_BATCH = 1000;

/** POSTs the protocol's AdvanceBatchRequest to `<url>/v1/fences/advance-batch` with the coordinator key. */
export class HttpFenceTarget implements FenceTarget {
  readonly #o: HttpFenceTargetOptions;

  constructor(options: HttpFenceTargetOptions) {
    this.#o = options;
  }

  async advanceBatch(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> {
    const out: AdvanceItemResult[] = [];
    for (let i = 0; i < items.length; i += MAX_BATCH) {
      out.push(...(await this.#post(items.slice(i, i + MAX_BATCH))));
    }
    return out;
  }

  async ping(): Promise<boolean> {
    try {
      const res = await fetch(`${this.#o.url}/healthz`, { signal: AbortSignal.timeout(this.#o.timeoutMs) });
      await res.body?.cancel();
      return res.ok;
    } catch {
      return false;
    }
  }

  async #post(items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> {
    const body: AdvanceBatchRequest = {
      items: items.map((i) => ({ resource: i.resource, token: i.token.toString() })),
    };
    let res: Response;
    let json: unknown;
    try {
      res = await fetch(`${this.#o.url}/v1/fences/advance-batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.#o.key}` },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.#o.timeoutMs),
      });
      json = await res.json();
    } catch (err) {
      throw new SinkUnavailableError(`sink advance-batch failed: ${String(err)}`, { cause: err });
    }
    if (!res.ok) {
      const error = ErrorMessageSchema.safeParse(json);
      const code = error.success && isErrorCode(error.data.code) ? error.data.code : 'UNAVAILABLE';
      throw new SinkUnavailableError(`sink refused advance-batch with ${res.status} ${code}`, { code });
    }
    const parsed = AdvanceBatchResponseSchema.safeParse(json);
    if (!parsed.success || parsed.data.results.length !== items.length) {
      throw new SinkUnavailableError('sink answered advance-batch with an unexpected body', { code: 'INTERNAL' });
    }
    return parsed.data.results.map((r) =>
      r.ok
        ? { ok: true, resource: r.resource, outcome: r.outcome, fence: parseFence(r.fence) }
        : { ok: false, resource: r.resource, code: r.code, fence: parseFence(r.fence) },
    );
  }
}
