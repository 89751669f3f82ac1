/**
 * The environment of every daemon the chaos cluster starts, built in one place: keys, addresses,
 * store settings, TLS and per-worker credentials (the cluster and the target-file exporter only
 * call these functions).
 *
 * By default every link is TLS from a per-run CA ({@link ChaosTls}): workers → coordinators (WSS,
 * HTTPS), workers and coordinators → sinks (HTTPS), coordinators → etcd (HTTPS with a client
 * certificate, `--client-cert-auth`), and etcd member ↔ member (peer TLS, client certificates
 * required). Each worker has its own credential (`WORKER_CREDENTIALS` = keyId:workerId:secret, the
 * coordinator binds the key to that worker id); no shared worker key exists. `plaintext` (the
 * runner's `--plaintext`, for local debugging) drops TLS only — credentials stay per worker — and
 * sets the daemons' INSECURE_PLAINTEXT where they listen beyond loopback.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { openPki, type CertFiles } from '@leasehold/cli/pki';
import { generateCapabilitySeed, parseCapabilitySigningKey, publicKeyEntryOf } from '@leasehold/protocol';
import { findLibfaketime } from '@leasehold/devkit';

export interface ChaosSecrets {
  /** Coordinators' bearer key at the sink. */
  readonly sinkKey: string;
  /** Read-only key at the sink (the runner's reads, the register handler's reads). */
  readonly readKey: string;
  /** Each worker's own credential, by worker name (= worker id). */
  readonly workerCredentials: ReadonlyMap<string, { readonly keyId: string; readonly secret: string }>;
  readonly adminKey: string;
  /** `id:secret` capability keys. */
  /** The coordinators' capability signing key, `id:<Ed25519 seed>` (the sinks get its public key). */
  readonly capabilitySigningKey: string;
}

const secret = (): string => randomBytes(24).toString('base64url');

export function newSecrets(workerNames: readonly string[]): ChaosSecrets {
  return {
    sinkKey: secret(),
    readKey: secret(),
    workerCredentials: new Map(workerNames.map((name) => [name, { keyId: `k-${name}`, secret: secret() }])),
    adminKey: secret(),
    capabilitySigningKey: `k1:${generateCapabilitySeed(randomBytes)}`,
  };
}

/** The run's PKI: one CA, a server certificate per listening process, one client certificate for etcd. */
export interface ChaosTls {
  /** CA file every client pins. */
  readonly caFile: string;
  readonly ca: Buffer;
  /** Server certificate of `name` for the addresses clients dial (its own, and the proxies'). */
  server(name: string, hosts: readonly string[]): CertFiles;
  /** Peer certificate of etcd member `name` (server and client usage: members dial each other). */
  peer(name: string, hosts: readonly string[]): CertFiles;
  /** etcd client certificate (coordinators and the runner's reads). */
  readonly etcdClient: CertFiles;
  /** The same, loaded: for undici agents and etcd3 clients. */
  readonly etcdClientPem: { readonly ca: Buffer; readonly cert: Buffer; readonly key: Buffer };
}

/**
 * Run `issue` (synchronous `openssl` calls) with the certificates' notBefore a day back, where
 * libfaketime exists: a coordinator whose wall clock runs behind (a standing skew of up to 90 s,
 * backward jumps of up to 300 s) must still find every certificate valid ("certificate is not yet
 * valid" otherwise). The variables reach only the `openssl` children spawned inside `issue`.
 */
function backdated<T>(issue: () => T): T {
  const library = findLibfaketime();
  if (library === undefined) return issue();
  const keys = ['LD_PRELOAD', 'FAKETIME', 'FAKETIME_DONT_FAKE_MONOTONIC'] as const;
  const saved = keys.map((k) => process.env[k]);
  Object.assign(process.env, { LD_PRELOAD: library, FAKETIME: '-1d', FAKETIME_DONT_FAKE_MONOTONIC: '1' });
  try {
    return issue();
  } finally {
    keys.forEach((k, i) => {
      const v = saved[i];
      if (v === undefined) Reflect.deleteProperty(process.env, k);
      else process.env[k] = v;
    });
  }
}

export function newChaosTls(dir: string): ChaosTls {
  const pki = backdated(() => openPki(dir, 'leasehold chaos CA'));
  const etcdClient = backdated(() => pki.client('etcd-client', 'leasehold-chaos'));
  const ca = readFileSync(pki.ca);
  return {
    caFile: pki.ca,
    ca,
    server: (name, hosts) => backdated(() => pki.server(name, [...new Set([...hosts, '127.0.0.1', 'localhost'])])),
    peer: (name, hosts) => backdated(() => pki.peer(name, [...new Set([...hosts, '127.0.0.1', 'localhost'])])),
    etcdClient,
    etcdClientPem: { ca, cert: readFileSync(etcdClient.cert), key: readFileSync(etcdClient.key) },
  };
}

/** Without TLS, a daemon listening beyond loopback must be told that keys cross in clear. */
function plaintext(prefix: string, host: string): Record<string, string> {
  return host === '127.0.0.1' ? {} : { [`${prefix}INSECURE_PLAINTEXT`]: 'true' };
}

/** `WORKER_CREDENTIALS`: every worker's key bound to its worker id. */
function credentialRing(s: ChaosSecrets): string {
  return [...s.workerCredentials].map(([workerId, c]) => `${c.keyId}:${workerId}:${c.secret}`).join(',');
}

export type SinkStore =
  { readonly kind: 'sqlite'; readonly dbPath: string } | { readonly kind: 'postgres'; readonly url: string };

export function sinkEnv(
  s: ChaosSecrets,
  o: { readonly host: string; readonly port: number; readonly store: SinkStore; readonly tls: CertFiles | undefined },
): Record<string, string> {
  return {
    ...(o.tls === undefined
      ? plaintext('LEASEHOLD_SINK_', o.host)
      : { LEASEHOLD_SINK_TLS_CERT: o.tls.cert, LEASEHOLD_SINK_TLS_KEY: o.tls.key }),
    LEASEHOLD_SINK_HOST: o.host,
    LEASEHOLD_SINK_PORT: String(o.port),
    ...(o.store.kind === 'sqlite'
      ? { LEASEHOLD_SINK_DB_PATH: o.store.dbPath }
      : { LEASEHOLD_SINK_STORE: 'postgres', LEASEHOLD_SINK_DATABASE_URL: o.store.url }),
    LEASEHOLD_SINK_COORDINATOR_KEYS: s.sinkKey,
    LEASEHOLD_SINK_READ_KEYS: s.readKey,
    LEASEHOLD_SINK_CAPABILITY_PUBLIC_KEYS: publicKeyEntryOf(parseCapabilitySigningKey(s.capabilitySigningKey)),
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
    /** Its server certificate and the run's CA; undefined: plaintext. */
    readonly tls: { readonly server: CertFiles; readonly pki: ChaosTls } | undefined;
  },
): Record<string, string> {
  const t = o.tls;
  return {
    ...(t === undefined
      ? plaintext('LEASEHOLD_COORDINATOR_', o.host)
      : {
          LEASEHOLD_COORDINATOR_TLS_CERT: t.server.cert,
          LEASEHOLD_COORDINATOR_TLS_KEY: t.server.key,
          LEASEHOLD_COORDINATOR_SINK_CA: t.pki.caFile,
          LEASEHOLD_COORDINATOR_ETCD_CA: t.pki.caFile,
          LEASEHOLD_COORDINATOR_ETCD_CERT: t.pki.etcdClient.cert,
          LEASEHOLD_COORDINATOR_ETCD_KEY: t.pki.etcdClient.key,
        }),
    LEASEHOLD_COORDINATOR_COORDINATOR_ID: o.id,
    LEASEHOLD_COORDINATOR_HOST: o.host,
    LEASEHOLD_COORDINATOR_PORT: String(o.port),
    LEASEHOLD_COORDINATOR_ETCD_ENDPOINTS: o.etcdEndpoints.join(','),
    LEASEHOLD_COORDINATOR_PREFIX: o.prefix,
    LEASEHOLD_COORDINATOR_SINK_URL: o.sinkUrl,
    LEASEHOLD_COORDINATOR_SINK_KEY: s.sinkKey,
    LEASEHOLD_COORDINATOR_CAPABILITY_SIGNING_KEY: s.capabilitySigningKey,
    LEASEHOLD_COORDINATOR_WORKER_CREDENTIALS: credentialRing(s),
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
    /** The run's CA file (pinned); undefined: plaintext. */
    readonly caFile: string | undefined;
  },
): Record<string, string> {
  const credential = s.workerCredentials.get(o.name);
  if (credential === undefined) throw new Error(`no credential for ${o.name}`);
  return {
    ...(o.caFile === undefined
      ? {}
      : // NODE_EXTRA_CA_CERTS: the chaos handler's own reads (global fetch) trust the run's CA too.
        { LEASEHOLD_WORKER_CA: o.caFile, NODE_EXTRA_CA_CERTS: o.caFile }),
    LEASEHOLD_WORKER_COORDINATORS: o.coordinatorUrls.join(','),
    LEASEHOLD_WORKER_SINK_URL: o.sinkUrl,
    LEASEHOLD_WORKER_KEY_ID: credential.keyId,
    LEASEHOLD_WORKER_SECRET: credential.secret,
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
