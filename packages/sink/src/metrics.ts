/**
 * Prometheus metrics of one sink instance, on its own registry (several sinks can live in one
 * process, e.g. in tests). Served at GET /metrics. Naming: `leasehold_sink_<what>_<unit>`, base
 * units, counters `_total`, label values lower-case (`stale_token`, not `STALE_TOKEN`).
 */
import { collectProcessMetrics } from '@leasehold/telemetry';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

export interface SinkMetrics {
  readonly registry: Registry;
  /** Writes by outcome: written, replayed, stale_token, fence_conflict, result_conflict, forbidden. */
  readonly writes: Counter<'outcome'>;
  /** Advances by outcome: advanced, unchanged, stale_token. */
  readonly advances: Counter<'outcome'>;
  /** Capability checks of writes by how they ended: cached, vouched, verified, refused. */
  readonly capabilityChecks: Counter<'result'>;
  /** Vouches of advance requests (the grants they list): accepted, or invalid (ignored). */
  readonly vouchedGrants: Counter<'result'>;
  /** Ops per committed batch. */
  readonly batchOps: Histogram;
  /** Writes per `POST /v1/writes/batch` request. */
  readonly writeBatchItems: Histogram;
  /** Seconds per batch transaction, including the fsync. */
  readonly commitSeconds: Histogram;
  /** Batches that failed to commit (rolled back). */
  readonly commitFailures: Counter;
  /** Batches run again after a deadlock or serialization failure (PostgreSQL), by SQLSTATE. */
  readonly storeRetries: Counter<'code'>;
  /** Open `GET /v1/events` streams. */
  readonly eventStreams: Gauge;
  /** Event streams cut off because the client did not keep up. */
  readonly eventStreamsCut: Counter;
  /** HTTP requests answered, by route template (`unmatched` for a 404) and status. */
  readonly httpRequests: Counter<'route' | 'status'>;
  /** Seconds from request received to response sent, by route template. */
  readonly httpRequestSeconds: Histogram<'route'>;
}

export interface MetricsOptions {
  /** Also collect process metrics (CPU, memory, event loop lag). Default true. */
  readonly processMetrics?: boolean;
}

export function createMetrics(options: MetricsOptions = {}): SinkMetrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectProcessMetrics(registry, 'leasehold_sink_');
  return {
    registry,
    writes: new Counter({
      name: 'leasehold_sink_writes_total',
      help: 'Fenced writes by outcome.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    advances: new Counter({
      name: 'leasehold_sink_advances_total',
      help: 'Fence advances by outcome.',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    capabilityChecks: new Counter({
      name: 'leasehold_sink_capability_checks_total',
      help: 'Capability checks of writes: cached (verified before), vouched (first use of a capability a fence advance vouched for), verified (Ed25519 now), refused.',
      labelNames: ['result'],
      registers: [registry],
    }),
    vouchedGrants: new Counter({
      name: 'leasehold_sink_vouched_grants_total',
      help: 'Grants listed in the vouches of fence advances: accepted (the vouch verified), invalid (ignored).',
      labelNames: ['result'],
      registers: [registry],
    }),
    batchOps: new Histogram({
      name: 'leasehold_sink_batch_ops',
      help: 'Operations per group-commit transaction.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
      registers: [registry],
    }),
    writeBatchItems: new Histogram({
      name: 'leasehold_sink_write_batch_items',
      help: 'Writes per POST /v1/writes/batch request.',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers: [registry],
    }),
    commitSeconds: new Histogram({
      name: 'leasehold_sink_commit_seconds',
      help: 'Duration of one group-commit transaction, fsync included.',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    commitFailures: new Counter({
      name: 'leasehold_sink_commit_failures_total',
      help: 'Group-commit transactions that failed and were rolled back.',
      registers: [registry],
    }),
    storeRetries: new Counter({
      name: 'leasehold_sink_store_retries_total',
      help: 'Batches run again from fresh reads after a deadlock or serialization failure (PostgreSQL).',
      labelNames: ['code'],
      registers: [registry],
    }),
    eventStreams: new Gauge({
      name: 'leasehold_sink_event_streams',
      help: 'Open GET /v1/events streams.',
      registers: [registry],
    }),
    eventStreamsCut: new Counter({
      name: 'leasehold_sink_event_streams_cut_total',
      help: 'Event streams cut off because the client did not read fast enough.',
      registers: [registry],
    }),
    httpRequests: new Counter({
      name: 'leasehold_sink_http_requests_total',
      help: 'HTTP requests answered, by route template (unmatched: no route) and status code.',
      labelNames: ['route', 'status'],
      registers: [registry],
    }),
    httpRequestSeconds: new Histogram({
      name: 'leasehold_sink_http_request_duration_seconds',
      help: 'From request received to response sent, by route template; a write includes its group commit.',
      labelNames: ['route'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [registry],
    }),
  };
}
