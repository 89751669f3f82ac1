/**
 * The {@link FenceTarget} of a sink over HTTP: the sink's own {@link SinkClient} POSTs the
 * protocol's AdvanceBatchRequest to `/v1/fences/advance-batch` with `Authorization: Bearer
 * <coordinator key>`, and the readiness probe proves the key and the capability signing key.
 */
import { formatToken, LeaseholdError, signCapability, type CapabilitySigningKey } from '@leasehold/protocol';
import { randomBytes } from 'node:crypto';
import { SinkClient, type TlsClientOptions } from '@leasehold/sink-client';
import { SinkUnavailableError } from '../errors.js';
import type { AdvanceItem, AdvanceItemResult, FenceTarget, SinkProbe } from './port.js';

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
