/**
 * The etcd of `leasehold cluster up`: one member in `<data-dir>/etcd` on the ports of the cluster's
 * state. With TLS (the default) it serves clients over TLS, requires a client certificate from its
 * own CA (`--client-cert-auth`), and runs with authentication and RBAC on: `cluster up` applies
 * {@link applyEtcdRbac} as root on every start (idempotent; an etcd data dir from before RBAC is
 * migrated in place), so the coordinator's user may touch only its prefix and nobody else has a
 * user. `--plaintext` (debugging) has neither TLS nor auth. The HTTP JSON gateway is off with TLS
 * (gRPC only; `/health` stays).
 */
import { accessSync, constants, mkdirSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { applyEtcdRbac } from './etcd-rbac.js';
import { DEFAULT_ROLE, describeChange } from './etcd-rbac-plan.js';
import { ManagedProcess, scheme, waitHealthy, type ClusterState } from './local-cluster.js';
import type { LocalIdentities } from './local-identities.js';

/** The key prefix of the cluster's coordinator, and so of its etcd role. */
export const CLUSTER_PREFIX = 'leasehold/';

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
        ...tlsArgs,
      ], // prettier-ignore
      {},
      0,
      process.stdout,
    ),
  );
  if (ids === undefined) {
    await waitHealthy(client, 20_000, '/health');
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
  for (const change of changes) if (change.kind !== 'enable-auth') say(`etcd: ${describeChange(change)}`);
  say(
    `etcd: authentication on; user ${ids.coordinator.etcdUser} (role ${DEFAULT_ROLE}) may use ${CLUSTER_PREFIX} only; ` +
      'the sink has no etcd identity',
  );
  return client;
}
