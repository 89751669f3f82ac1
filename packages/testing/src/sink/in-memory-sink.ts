/**
 * The sink in process: the sink's own service and HTTP app (`createSink` of `@leasehold/sink`,
 * not listening) over the {@link MemoryFenceStore}. Workers write through the app (`inject`: the
 * capability check, the body limits and the fence rule are the sink's, unchanged); the coordinator
 * advances through the service. {@link InMemorySink.results} and {@link InMemorySink.decisions}
 * are what a test reads back.
 */
import type { AdvanceItem, AdvanceItemResult, FenceTarget } from '@leasehold/coordinator';
import { formatToken, LeaseholdError, parseFence, type ErrorMessage, type JsonValue } from '@leasehold/protocol';
import { createSink, loadConfig, type Sink } from '@leasehold/sink';
import type { WriteArgs, WriteResult } from '@leasehold/sink-client';
import type { SinkWriter } from '@leasehold/worker';
import type { Logger } from 'pino';
import { MemoryFenceStore } from './memory-fence-store.js';

/** A result the sink stored. */
export interface StoredResult {
  readonly resultId: string;
  readonly token: bigint;
  readonly workerId: string;
  readonly payload: JsonValue;
  readonly writtenAtMs: number;
}

/** One decision of the sink: an advance or a write, and what it answered. */
export interface SinkDecision {
  readonly kind: 'advance' | 'write';
  readonly resource: string;
  readonly token: bigint;
  readonly fenceBefore: bigint;
  /** `advanced`, `unchanged`, `written`, `replayed`, or the refusal (`STALE_TOKEN`, …). */
  readonly outcome: string;
  readonly workerId?: string | undefined;
  readonly resultId?: string | undefined;
}

const WRITE_REFUSALS = new Set(['STALE_TOKEN', 'FENCE_CONFLICT', 'RESULT_CONFLICT']);

export class InMemorySink {
  readonly store: MemoryFenceStore;
  readonly #sink: Sink;

  private constructor(store: MemoryFenceStore, sink: Sink) {
    this.store = store;
    this.#sink = sink;
  }

  /** A sink that accepts capabilities signed by `capabilityPublicKeys` (`id:key,...`) and advances with `coordinatorKey`. */
  static async start(options: {
    readonly coordinatorKey: string;
    readonly capabilityPublicKeys: string;
    readonly wallClock: () => number;
    readonly logger: Logger;
  }): Promise<InMemorySink> {
    const store = new MemoryFenceStore({ nowMs: options.wallClock });
    const config = loadConfig(
      {
        LEASEHOLD_SINK_COORDINATOR_KEYS: options.coordinatorKey,
        LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: options.capabilityPublicKeys,
      },
      [],
    );
    const sink = await createSink(config, {
      listen: false,
      store,
      nowMs: options.wallClock,
      processMetrics: false,
      logger: options.logger,
    });
    return new InMemorySink(store, sink);
  }

  /** The coordinator's fence port: advances through the sink's service (one durable batch each call). */
  readonly fenceTarget: FenceTarget = {
    advanceBatch: async (items: readonly AdvanceItem[]): Promise<AdvanceItemResult[]> => {
      const decisions = await this.#sink.service.advanceBatch(items);
      return decisions.map((d, i): AdvanceItemResult => {
        const resource = items[i]?.resource ?? '';
        return d.ok
          ? { ok: true, resource, outcome: d.outcome, fence: d.fence }
          : { ok: false, resource, code: 'STALE_TOKEN', fence: d.fence };
      });
    },
    ping: () => Promise.resolve(this.store.isOpen()),
  };

  /**
   * A worker's sink (the SDK's `SinkWriter`): each write is a `POST /v1/writes` to the sink's app,
   * in process — decided by the sink's capability check and fence rule.
   */
  writer(around: <T>(write: () => Promise<T>) => Promise<T> = (write) => write()): SinkWriter {
    return {
      write: (args) => around(() => this.#write(args)),
      close: () => Promise.resolve(),
      health: () => Promise.resolve({ live: true, ready: this.store.isOpen() }),
    };
  }

  async #write(args: WriteArgs): Promise<WriteResult> {
    const res = await this.#sink.app.inject({
      method: 'POST',
      url: '/v1/writes',
      payload: { ...args, token: formatToken(args.token) },
    });
    const body = res.json<{ outcome?: 'written' | 'replayed'; fence?: string } & Partial<ErrorMessage>>();
    if (res.statusCode === 200 && body.outcome !== undefined && body.fence !== undefined) {
      return { ok: true, outcome: body.outcome, fence: parseFence(body.fence) };
    }
    if (res.statusCode === 409 && body.code !== undefined && WRITE_REFUSALS.has(body.code)) {
      return {
        ok: false,
        code: body.code as 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT',
        fence: parseFence(body.fence ?? '0'),
      };
    }
    throw new LeaseholdError(body.code ?? 'INTERNAL', body.message ?? `sink answered ${res.statusCode}`);
  }

  /** The fence of `resource` now (0: never advanced). */
  fence(resource: string): Promise<bigint> {
    return this.store.fenceOf(resource);
  }

  /** Every result stored for `resource`, oldest first. */
  async results(resource: string): Promise<StoredResult[]> {
    const out: StoredResult[] = [];
    for (let after = 0n; ;) {
      const page = await this.#sink.service.resourcePage(resource, { after });
      for (const r of page.results) {
        out.push({
          resultId: r.resultId,
          token: r.token,
          workerId: r.workerId,
          payload: JSON.parse(r.payload) as JsonValue,
          writtenAtMs: r.writtenAtMs,
        });
      }
      if (!page.hasMore) return out;
      after = page.next;
    }
  }

  /** Every decision the sink took (advances and writes, refusals included), in order; of `resource` when given. */
  async decisions(resource?: string): Promise<SinkDecision[]> {
    const out: SinkDecision[] = [];
    for (let after = 0; ;) {
      const page = await this.#sink.service.decisions(after, 1_000);
      for (const d of page.decisions) {
        if (resource !== undefined && d.resource !== resource) continue;
        out.push({
          kind: d.kind,
          resource: d.resource,
          token: d.token,
          fenceBefore: d.fenceBefore,
          outcome: d.outcome,
          ...(d.workerId === undefined ? {} : { workerId: d.workerId }),
          ...(d.resultId === undefined ? {} : { resultId: d.resultId }),
        });
      }
      if (page.decisions.length === 0) return out;
      after = page.next;
    }
  }

  close(): Promise<void> {
    return this.#sink.close();
  }
}
