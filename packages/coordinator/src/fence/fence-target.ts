/**
 * The write target's fence, as the coordinator sees it: the port step (b) of a grant goes through.
 *
 * `advanceBatch` advances many resources in one durable commit at the sink. A refusal
 * (STALE_TOKEN: the fence is already past the token) is data in the result; a thrown
 * {@link SinkUnavailableError} means nothing is known (the advance may or may not have happened),
 * which the caller treats exactly like a refusal: no grant is sent.
 */
import { formatToken, LeaseholdError, signCapability, type CapabilitySigningKey } from '@leasehold/protocol';
import { randomBytes } from 'node:crypto';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import { SinkUnavailableError } from '../errors.js';

export interface AdvanceItem {
  readonly resource: string;
  readonly token: bigint;
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
  /** Results in the order of `items`. Throws {@link SinkUnavailableError} when the outcome is unknown. */
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

  async probe(key: CapabilitySigningKey): Promise<SinkProbe> {
    const claims = {
      resource: 'leasehold.probe',
      token: 1n,
      workerId: 'leasehold.probe',
      incarnation: randomBytes(8).toString('hex'),
    };
    const capability = signCapability(key, claims);
    try {
      const res = await this.#client.probe({ capability, claims: { ...claims, token: formatToken(claims.token) } });
      if (res.capability === 'ok') return { state: 'ok' };
      return {
        state: 'capability-mismatch',
        detail:
          res.capability === 'unknown-key'
            ? `the sink has no capability public key with id ${res.keyId}: add ${key.id}:${key.publicKeyText} to its CAPABILITY_PUBLIC_KEYS`
            : `the sink's capability public key ${res.keyId} is another key: this coordinator signs with ${key.id}:${key.publicKeyText} (the sink's CAPABILITY_PUBLIC_KEYS)`,
      };
    } catch (err) {
      if (err instanceof LeaseholdError && (err.code === 'UNAUTHENTICATED' || err.code === 'FORBIDDEN')) {
        return { state: 'unauthenticated', detail: 'the sink refused the coordinator key: check SINK_KEY' };
      }
      if (err instanceof LeaseholdError && err.code === 'NOT_FOUND') {
        // A sink older than the probe: reachability is all that can be told.
        return (await this.ping()) ? { state: 'ok' } : { state: 'unreachable', detail: 'the sink is not ready' };
      }
      return { state: 'unreachable', detail: `no answer from the sink at SINK_URL: ${String(err)}` };
    }
  }

  close(): void {
    void this.#client.close();
  }
}
