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
  /**
   * The capability signing key: each advance-batch vouches for the grants it is made for, so the
   * sink skips verifying their capabilities on their writes. Without it, no vouch is sent.
   */
  readonly vouchWith?: CapabilitySigningKey;
  /** Clock of the fallback below (ms). Default `performance.now`. */
  readonly nowMs?: () => number;
}

/** After a sink refused a vouch as INVALID_MESSAGE (a sink older than vouches), how long to send none. */
export const VOUCH_RETRY_AFTER_MS = 60_000;

/** Each SinkClient call carries at most this many advances (the protocol's batch limit). */
const MAX_BATCH = 1000;

/**
 * The sink's own {@link SinkClient}: POSTs the protocol's AdvanceBatchRequest to
 * `/v1/fences/advance-batch` with `Authorization: Bearer <coordinator key>`.
 */
export class SinkFenceTarget implements FenceTarget {
  readonly #client: SinkClient;
  readonly #vouchWith: CapabilitySigningKey | undefined;
  readonly #nowMs: () => number;
  /** No vouches before this time: the sink refused one (it predates them). */
  #noVouchUntilMs = -Infinity;

  constructor(options: SinkFenceTargetOptions) {
    this.#vouchWith = options.vouchWith;
    this.#nowMs = options.nowMs ?? (() => performance.now());
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
        out.push(...(await this.#advanceChunk(chunk)));
      } catch (err) {
        const code = err instanceof LeaseholdError ? err.code : 'UNAVAILABLE';
        throw new SinkUnavailableError(`sink advance-batch failed: ${String(err)}`, { cause: err, code });
      }
    }
    return out;
  }

  /**
   * One advance-batch, with a vouch when there is a key and the sink has not refused one lately. A
   * sink that predates vouches refuses the whole request as INVALID_MESSAGE before advancing
   * anything (its schema is strict), so the same chunk goes again without, and no vouch is sent for
   * {@link VOUCH_RETRY_AFTER_MS} (an upgraded sink is picked up after that). A request too large
   * with its grants (413) goes again without them too.
   */
  async #advanceChunk(chunk: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> {
    const vouchWith = this.#vouchWith;
    // Without grants in the chunk the client sends no vouch either (SinkClient.advanceBatch).
    if (vouchWith === undefined || this.#nowMs() < this.#noVouchUntilMs) {
      return this.#client.advanceBatch(chunk);
    }
    try {
      return await this.#client.advanceBatch(chunk, { vouchWith });
    } catch (err) {
      if (!(err instanceof LeaseholdError)) throw err;
      if (err.code === 'INVALID_MESSAGE') {
        this.#noVouchUntilMs = this.#nowMs() + VOUCH_RETRY_AFTER_MS;
      } else if (err.code !== 'PAYLOAD_TOO_LARGE') {
        throw err;
      }
      // Refused before anything was advanced: the same chunk again, without the grants (a third of
      // the bytes: a sink whose BODY_LIMIT_BYTES was lowered takes what it took before vouches).
      return this.#client.advanceBatch(chunk);
    }
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
