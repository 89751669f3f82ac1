/**
 * The etcd of `leasehold cluster up`: one member in `<data-dir>/etcd` on the ports of the cluster's
 * state. With TLS (the default) it serves clients over TLS, requires a client certificate from its
 * own CA (`--client-cert-auth`), and runs with authentication and RBAC on: `cluster up` applies
 * {@link applyEtcdRbac} as root on every start (idempotent; an etcd data dir from before RBAC is
 * migrated in place), so the coordinator's user may touch only its prefix and nobody else has a
 * user. `--plaintext` (debugging) has neither TLS nor auth. The HTTP JSON gateway is off with TLS
 * (gRPC only; `/health` stays). Quota and auto-compaction: {@link etcdSpaceArgs}.
 */
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { applyEtcdRbac } from './etcd-rbac.js';
import { DEFAULT_ROLE, describeChange } from './etcd-rbac-plan.js';
import { ManagedProcess, scheme, waitHealthy, type ClusterState } from './local-cluster.js';
import type { LocalIdentities } from './local-identities.js';

/** The key prefix of the cluster's coordinator, and so of its etcd role. */
export const CLUSTER_PREFIX = 'leasehold/';

/**
 * etcd's space settings, the same wherever leasehold runs etcd (this file, deploy/compose.yaml,
 * deploy/k8s/etcd.yaml, the two-host walkthrough; test/deploy checks that they agree, and the
 * integration tests read them back from the running etcd). Why these values: docs/deploy.md, "etcd:
 * quota, compaction, defragmentation".
 *
 * - Backend quota 2 GiB, stated rather than implied (etcd's own default): the alerts' ratio and the
 *   runbook have a number that no etcd upgrade moves, and it leaves room for a defragmentation's
 *   copy on the 8 GiB volumes of the examples. Past it etcd raises NOSPACE and refuses every write.
 * - Periodic auto-compaction, 5 minutes: etcd keeps between 5 and 10 minutes of history whatever
 *   the write rate (a revision count would shrink to seconds under load, just when a restarting
 *   coordinator's snapshot read takes longest), so a watch-fed coordinator resumes its watch after a
 *   snapshot or a reconnect of less than 5 minutes without being compacted under its feet. The
 *   interval Kubernetes' API server uses for its own etcd.
 */
export const ETCD_QUOTA_BACKEND_BYTES = 2 * 1024 * 1024 * 1024;
export const ETCD_AUTO_COMPACTION_MODE = 'periodic';
export const ETCD_AUTO_COMPACTION_RETENTION = '5m';

/** The flags of {@link ETCD_QUOTA_BACKEND_BYTES} and the auto-compaction settings. */
export function etcdSpaceArgs(): string[] {
  return [
    '--quota-backend-bytes', String(ETCD_QUOTA_BACKEND_BYTES),
    '--auto-compaction-mode', ETCD_AUTO_COMPACTION_MODE,
    '--auto-compaction-retention', ETCD_AUTO_COMPACTION_RETENTION,
  ]; // prettier-ignore
}

function findEtcd(): string | undefined {
  const explicit = process.env.ETCD_BIN;
  if (explicit !== undefined && explicit !== '') return explicit;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'etcd');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** Start etcd, wait for it, and (TLS) apply users, roles and auth. Resolves to the client URL. */
export async function startLocalEtcd(
  dataDir: string,
  state: ClusterState,
  procs: ManagedProcess[],
  ids: LocalIdentities | undefined,
  say: (text: string) => void,
): Promise<string> {
  const bin = findEtcd();
  if (bin === undefined) {
    throw new Error(
      'etcd not found: install etcd-server (apt-get install etcd-server), set ETCD_BIN, or pass --etcd-endpoints',
    );
  }
  const client = `${scheme(state)}://127.0.0.1:${state.ports.etcdClient}`;
  const peer = `http://127.0.0.1:${state.ports.etcdPeer}`;
  const tlsArgs =
    ids === undefined
      ? []
      : [
          '--cert-file', ids.etcd.server.cert, '--key-file', ids.etcd.server.key,
          '--trusted-ca-file', ids.etcd.ca, '--client-cert-auth',
          // The JSON gateway ignores client certificates' CNs (etcd says so) and would dial etcd
          // with etcd's server key as a client key, which has no client usage: nothing uses it.
          '--enable-grpc-gateway=false',
        ]; // prettier-ignore
  const etcdDir = join(dataDir, 'etcd');
  mkdirSync(etcdDir, { recursive: true, mode: 0o700 });
  procs.push(
    new ManagedProcess(
      'etcd',
      bin,
      [
        '--name', 'leasehold-local', '--data-dir', etcdDir,
        '--listen-client-urls', client, '--advertise-client-urls', client,
        '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
        '--initial-cluster', `leasehold-local=${peer}`,
        '--election-timeout', '500', '--heartbeat-interval', '50',
        '--logger', 'zap', '--log-level', 'warn',
        ...etcdSpaceArgs(),
        ...tlsArgs,
      ], // prettier-ignore
      {},
      0,
      process.stdout,
    ),
  );
  const space =
    `etcd: backend quota ${ETCD_QUOTA_BACKEND_BYTES / 1024 ** 3} GiB, history auto-compacted ` +
    `(${ETCD_AUTO_COMPACTION_MODE}, ${ETCD_AUTO_COMPACTION_RETENTION}); see docs/deploy.md for NOSPACE`;
  if (ids === undefined) {
    await waitHealthy(client, 20_000, '/health');
    say(space);
    return client;
  }
  const root = {
    ca: readFileSync(ids.etcd.ca),
    cert: readFileSync(ids.etcd.root.cert),
    key: readFileSync(ids.etcd.root.key),
  };
  await waitHealthy(client, 20_000, '/health', root);
  const changes = await applyEtcdRbac(
    { endpoints: [client], ...root },
    { prefix: CLUSTER_PREFIX, role: DEFAULT_ROLE, coordinatorUsers: [ids.coordinator.etcdUser] },
    { timeoutMs: 20_000 },
  );
  say(space);
  for (const change of changes) if (change.kind !== 'enable-auth') say(`etcd: ${describeChange(change)}`);
  say(
    `etcd: authentication on; user ${ids.coordinator.etcdUser} (role ${DEFAULT_ROLE}) may use ${CLUSTER_PREFIX} only; ` +
      'the sink has no etcd identity',
  );
  return client;
}
