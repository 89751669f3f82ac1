/**
 * The environment of every daemon the chaos cluster starts, built in one place: keys, addresses,
 * store settings. When the services gain TLS or per-worker credentials, this file is where their
 * variables go (the cluster and the target-file exporter only call these functions).
 */
import { randomBytes } from 'node:crypto';

export interface ChaosSecrets {
  /** Coordinators' bearer key at the sink. */
  readonly sinkKey: string;
  /** Read-only key at the sink (the runner's reads, the register handler's reads). */
  readonly readKey: string;
  readonly workerKey: string;
  readonly adminKey: string;
  /** `id:secret` capability keys. */
  readonly capabilityKeys: string;
}

const secret = (): string => randomBytes(24).toString('base64url');

export function newSecrets(): ChaosSecrets {
  return {
    sinkKey: secret(),
    readKey: secret(),
    workerKey: secret(),
    adminKey: secret(),
    capabilityKeys: `k1:${secret()}`,
  };
}

export type SinkStore =
  { readonly kind: 'sqlite'; readonly dbPath: string } | { readonly kind: 'postgres'; readonly url: string };

export function sinkEnv(
  s: ChaosSecrets,
  o: { readonly host: string; readonly port: number; readonly store: SinkStore },
): Record<string, string> {
  return {
    LEASEHOLD_SINK_HOST: o.host,
    LEASEHOLD_SINK_PORT: String(o.port),
    ...(o.store.kind === 'sqlite'
      ? { LEASEHOLD_SINK_DB_PATH: o.store.dbPath }
      : { LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: o.store.url }),
    LEASEHOLD_SINK_COORDINATOR_KEYS: s.sinkKey,
    LEASEHOLD_SINK_READ_KEYS: s.readKey,
    LEASEHOLD_SINK_CAPABILITY_KEYS: s.capabilityKeys,
    LEASEHOLD_SINK_LOG_LEVEL: 'info',
  };
}

export function coordinatorEnv(
  s: ChaosSecrets,
  o: {
    readonly id: string;
    readonly host: string;
    readonly port: number;
    readonly prefix: string;
    readonly etcdEndpoints: readonly string[];
    readonly sinkUrl: string;
    readonly sessionTtlMs: number;
    readonly heartbeatIntervalMs: number;
  },
): Record<string, string> {
  return {
    LEASEHOLD_COORDINATOR_COORDINATOR_ID: o.id,
    LEASEHOLD_COORDINATOR_HOST: o.host,
    LEASEHOLD_COORDINATOR_PORT: String(o.port),
    LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: o.etcdEndpoints.join(','),
    LEASEHOLD_COORDINATOR_PREFIX: o.prefix,
    LEASEHOLD_COORDINATOR_SINK_URL: o.sinkUrl,
    LEASEHOLD_COORDINATOR_SINK_KEY: s.sinkKey,
    LEASEHOLD_COORDINATOR_CAPABILITY_KEYS: s.capabilityKeys,
    LEASEHOLD_COORDINATOR_WORKER_KEYS: s.workerKey,
    LEASEHOLD_COORDINATOR_ADMIN_KEYS: s.adminKey,
    LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(o.sessionTtlMs),
    LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: String(o.heartbeatIntervalMs),
    LEASEHOLD_COORDINATOR_LOG_LEVEL: 'info',
  };
}

export function workerEnv(
  s: ChaosSecrets,
  o: {
    readonly name: string;
    readonly coordinatorUrls: readonly string[];
    readonly sinkUrl: string;
    readonly concurrency: number;
    readonly handlerPath: string;
  },
): Record<string, string> {
  return {
    LEASEHOLD_WORKER_COORDINATORS: o.coordinatorUrls.join(','),
    LEASEHOLD_WORKER_SINK_URL: o.sinkUrl,
    LEASEHOLD_WORKER_WORKER_KEY: s.workerKey,
    LEASEHOLD_WORKER_WORKER_ID: o.name,
    LEASEHOLD_WORKER_CONCURRENCY: String(o.concurrency),
    LEASEHOLD_WORKER_HANDLER: o.handlerPath,
    LEASEHOLD_WORKER_LOG_LEVEL: 'info',
    LEASEHOLD_WORKER_PRETTY: 'false',
    LEASEHOLD_WORKER_SHUTDOWN_GRACE_MS: '2000',
    // The chaos handler's own reads (the register workload reads the resource's value at the sink).
    LEASEHOLD_CHAOS_SINK_URL: o.sinkUrl,
    LEASEHOLD_CHAOS_SINK_READ_KEY: s.readKey,
  };
}
