/**
 * A whole leasehold cluster of real processes for e2e and chaos tests: etcd (the harness), the
 * sink, one or more coordinators and N workers, each a child process built from `dist/`, with
 * fresh keys and its own temp directory.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  generateCapabilitySeed,
  parseCapabilitySigningKey,
  publicKeyEntryOf,
  type DecisionPage,
} from '@leasehold/protocol';
import { openPki } from '@leasehold/cli/pki';
import { SinkClient } from '@leasehold/sink-client';
import { startEtcd, type EtcdHandle, type StartEtcdOptions } from '@leasehold/devkit';
import { AdminClient } from './admin-client.js';
import { BIN, Service } from './service.js';

export interface ClusterKeys {
  readonly sinkCoordinatorKey: string;
  /** The coordinators' capability signing key, `id:<Ed25519 seed>` (the sinks get its public key). */
  readonly capabilitySigningKey: string;
  readonly workerKey: string;
  readonly adminKey: string;
}

export interface ClusterOptions {
  readonly coordinators?: number;
  readonly workers?: number;
  readonly sessionTtlMs?: number;
  readonly heartbeatIntervalMs?: number;
  readonly fenceOnExpiry?: boolean;
  /** Extra environment for every worker (e.g. LEASEHOLD_WORKER_HANDLER). */
  readonly workerEnv?: Readonly<Record<string, string>>;
  /** Extra environment for the sink (e.g. LEASEHOLD_SINK_STORE=postgres, LEASEHOLD_SINK_DATABASE_URL). */
  readonly sinkEnv?: Readonly<Record<string, string>>;
  /** Extra environment for every coordinator (e.g. LEASEHOLD_COORDINATOR_RETRY_MAX_ATTEMPTS). */
  readonly coordinatorEnv?: Readonly<Record<string, string>>;
  readonly etcd?: StartEtcdOptions;
  readonly prefix?: string;
  /**
   * OpenTelemetry with the span-file exporter in every process: `<dir>/spans-<service>.jsonl`
   * (read them with `readSpanFiles(cluster.dir)`). A worker's own env may turn it off again.
   */
  readonly tracing?: boolean;
}

export interface Cluster {
  readonly dir: string;
  readonly keys: ClusterKeys;
  readonly etcd: EtcdHandle;
  readonly sink: Service;
  readonly coordinators: Service[];
  readonly workers: Service[];
  readonly sinkClient: SinkClient;
  /** Start one more worker process (not started yet when `start` is false). */
  addWorker(name: string, env?: Readonly<Record<string, string>>, start?: boolean): Promise<Service>;
  /** The admin client on coordinator `coordinatorIndex` (default 0), HTTPS with the cluster's CA. */
  admin(coordinatorIndex?: number): AdminClient;
  stop(): Promise<void>;
}

/** The admin client of a cluster's coordinator (kept for older imports). */
export type AdminApi = AdminClient;

const secret = () => randomBytes(24).toString('base64url');

export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'leasehold-cluster-'));
  const keys: ClusterKeys = {
    sinkCoordinatorKey: secret(),
    capabilitySigningKey: `k1:${generateCapabilitySeed(randomBytes)}`,
    workerKey: secret(),
    adminKey: secret(),
  };
  const tracingEnv = (prefix: string, service: string): Record<string, string> =>
    opts.tracing === true
      ? { [`${prefix}TRACING`]: 'file', [`${prefix}TRACING_PATH`]: join(dir, `spans-${service}.jsonl`) }
      : {};
  const etcd = await startEtcd(opts.etcd);
  const services: Service[] = [];
  // TLS on every service link: the sink and each coordinator serve HTTPS / WSS with their own
  // certificate of a private CA (server usage only); each worker proves who it is with its own
  // client certificate (CN = worker id).
  const pki = openPki(join(dir, 'pki'), 'leasehold e2e CA');
  const ca = readFileSync(pki.ca);
  const sinkCert = pki.server('sink', ['127.0.0.1', 'localhost']);
  try {
    const sink = new Service({
      name: 'sink',
      bin: BIN.sink,
      dir,
      listens: true,
      env: {
        LEASEHOLD_SINK_DB_PATH: join(dir, 'sink.db'),
        LEASEHOLD_SINK_COORDINATOR_KEYS: keys.sinkCoordinatorKey,
        LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: publicKeyEntryOf(parseCapabilitySigningKey(keys.capabilitySigningKey)),
        LEASEHOLD_SINK_PORT: '0',
        LEASEHOLD_SINK_LOG_LEVEL: 'info',
        LEASEHOLD_SINK_TLS_CERT: sinkCert.cert,
        LEASEHOLD_SINK_TLS_KEY: sinkCert.key,
        ...tracingEnv('LEASEHOLD_SINK_', 'sink'),
        ...opts.sinkEnv,
      },
      ca,
    });
    services.push(sink);
    await sink.start();

    const ttl = opts.sessionTtlMs ?? 2_000;
    const coordinators: Service[] = [];
    for (let i = 0; i < (opts.coordinators ?? 1); i++) {
      const server = pki.server(`coordinator-${i}`, ['127.0.0.1', 'localhost']);
      const c = new Service({
        name: `coordinator-${i}`,
        bin: BIN.coordinator,
        dir,
        listens: true,
        env: {
          LEASEHOLD_COORDINATOR_COORDINATOR_ID: `c${i}`,
          LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: etcd.endpoints.join(','),
          LEASEHOLD_COORDINATOR_PREFIX: opts.prefix ?? `leasehold-e2e-${process.pid}/`,
          LEASEHOLD_COORDINATOR_PORT: '0',
          LEASEHOLD_COORDINATOR_SINK_URL: sink.url,
          LEASEHOLD_COORDINATOR_SINK_KEY: keys.sinkCoordinatorKey,
          LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: keys.capabilitySigningKey,
          LEASEHOLD_COORDINATOR_TLS_CERT: server.cert,
          LEASEHOLD_COORDINATOR_TLS_KEY: server.key,
          LEASEHOLD_COORDINATOR_TLS_CLIENT_CA: pki.ca,
          LEASEHOLD_COORDINATOR_SINK_CA: pki.ca,
          LEASEHOLD_COORDINATOR_ADMIN_KEYS: keys.adminKey,
          LEASEHOLD_COORDINATOR_SESSION_TTL_MS: String(ttl),
          LEASEHOLD_COORDINATOR_HEARTBEAT_INTERVAL_MS: String(opts.heartbeatIntervalMs ?? Math.floor(ttl / 4)),
          LEASEHOLD_COORDINATOR_FENCE_ON_EXPIRY: String(opts.fenceOnExpiry ?? false),
          LEASEHOLD_COORDINATOR_LOG_LEVEL: 'info',
          ...tracingEnv('LEASEHOLD_COORDINATOR_', `coordinator-${i}`),
          ...opts.coordinatorEnv,
        },
        ca,
      });
      services.push(c);
      coordinators.push(c);
      await c.start();
    }

    const workers: Service[] = [];
    const addWorker = async (name: string, env: Readonly<Record<string, string>> = {}, start = true) => {
      const cert = pki.client(`worker-${name}`, name);
      const w = new Service({
        name,
        bin: BIN.worker,
        dir,
        listens: false,
        env: {
          LEASEHOLD_WORKER_COORDINATORS: coordinators.map((c) => c.url).join(','),
          LEASEHOLD_WORKER_SINK_URL: sink.url,
          LEASEHOLD_WORKER_CA: pki.ca,
          LEASEHOLD_WORKER_TLS_CERT: cert.cert,
          LEASEHOLD_WORKER_TLS_KEY: cert.key,
          LEASEHOLD_WORKER_WORKER_ID: name,
          LEASEHOLD_WORKER_LOG_LEVEL: 'info',
          LEASEHOLD_WORKER_PRETTY: 'false',
          ...tracingEnv('LEASEHOLD_WORKER_', name),
          ...opts.workerEnv,
          ...env,
        },
      });
      services.push(w);
      workers.push(w);
      if (start) await w.start();
      return w;
    };
    for (let i = 0; i < (opts.workers ?? 0); i++) await addWorker(`worker-${i}`);

    const sinkClient = new SinkClient({ url: sink.url, key: keys.sinkCoordinatorKey, tls: { ca } });
    const admins = new Map<number, AdminClient>();
    const admin = (index = 0): AdminClient => {
      const c = coordinators[index];
      if (c === undefined) throw new Error(`no coordinator ${index}`);
      let client = admins.get(index);
      if (client === undefined) {
        client = new AdminClient(c.url, keys.adminKey, { ca });
        admins.set(index, client);
      }
      return client;
    };

    return {
      dir,
      keys,
      etcd,
      sink,
      coordinators,
      workers,
      sinkClient,
      addWorker,
      admin,
      async stop() {
        void sinkClient.close();
        await Promise.all([...admins.values()].map((a) => a.close()));
        // Workers first (they release), then coordinators, then the sink, then etcd.
        await Promise.all(workers.map((w) => w.stop()));
        await Promise.all(coordinators.map((c) => c.stop()));
        await sink.stop();
        for (const s of services) s.close();
        await etcd.stop();
        if (process.env.LEASEHOLD_KEEP_TEST_DIRS === undefined) rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await Promise.all(services.map((s) => s.kill()));
    for (const s of services) s.close();
    await etcd.stop();
    throw err;
  }
}

/** The sink's whole decision log, following its pagination. */
export async function allDecisions(sink: SinkClient): Promise<DecisionPage['decisions']> {
  const out: DecisionPage['decisions'] = [];
  let after = 0;
  for (;;) {
    const page = await sink.decisions(after, 1000);
    out.push(...page.decisions);
    if (page.decisions.length === 0 || page.next === after) return out;
    after = page.next;
  }
}
