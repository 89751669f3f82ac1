/**
 * Who is who in the local cluster of `leasehold cluster up`: one identity per service, each with
 * its own key, from two CAs in `<data-dir>/pki`:
 *
 * | file (under pki/)               | CA       | usage      | who holds it                                      |
 * | ------------------------------- | -------- | ---------- | ------------------------------------------------- |
 * | `ca.crt`                        | services | CA         | everyone pins it (workers, CLI, coordinator)      |
 * | `sink.crt` `sink.key`           | services | serverAuth | the sink(s): HTTPS                                |
 * | `coordinator-1.crt` `.key`      | services | serverAuth | the coordinator: HTTPS / WSS                      |
 * | `etcd/ca.crt`                   | etcd     | CA         | etcd (trusted client CA) and the coordinator      |
 * | `etcd/server.crt` `.key`        | etcd     | serverAuth | etcd: its client port                             |
 * | `etcd/coordinator-1.crt` `.key` | etcd     | clientAuth | the coordinator: etcd user `coordinator-1`        |
 * | `etcd/root.crt` `.key`          | etcd     | clientAuth | `cluster up` itself: etcd's root, for setup only  |
 *
 * The sink has no etcd identity: its key is a server key of the other CA, which etcd refuses at
 * the TLS handshake. etcd trusts only its own CA because it takes the user name from a client
 * certificate's CN: a CA that also signed worker certificates (CN = worker id) would let a worker
 * named `root` in.
 *
 * Before this layout (until 2026-12) one certificate (`services`) served both the sink and the
 * coordinator and etcd trusted the services CA; {@link localIdentities} removes those files.
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openPki, type CertFiles } from './pki.js';

const LOOPBACK = ['127.0.0.1', 'localhost'] as const;

export interface LocalIdentities {
  /** The services' CA file (pki/ca.crt). */
  readonly ca: string;
  readonly sink: CertFiles;
  readonly coordinator: {
    readonly https: CertFiles;
    /** Its etcd client certificate; the CN is {@link etcdUser}. */
    readonly etcd: CertFiles;
    readonly etcdUser: string;
  };
  readonly etcd: {
    /** etcd's CA file: the only CA etcd trusts for clients. */
    readonly ca: string;
    readonly server: CertFiles;
    /** etcd's root (CN root): `cluster up` sets up users and roles with it, nothing else holds it. */
    readonly root: CertFiles;
  };
  /** Files of the old shared layout that were removed (for one line of output). */
  readonly removed: readonly string[];
}

/** The cluster's one coordinator, by the name of its identity (and its etcd user). */
export const COORDINATOR_NAME = 'coordinator-1';

/** Files of the layout before one identity per service: a shared services key, etcd on the services CA. */
const LEGACY = ['services', 'etcd', 'coordinator-etcd', 'etcd-probe'];

/** Open (or create) every identity of the local cluster; removes the legacy shared ones. */
export function localIdentities(dataDir: string): LocalIdentities {
  const dir = join(dataDir, 'pki');
  const services = openPki(dir);
  const etcdPki = openPki(join(dir, 'etcd'), 'leasehold local etcd CA');
  const removed: string[] = [];
  for (const name of LEGACY) {
    for (const ext of ['crt', 'key', 'csr', 'ext']) {
      const file = join(dir, `${name}.${ext}`);
      if (!existsSync(file)) continue;
      rmSync(file);
      removed.push(`${name}.${ext}`);
    }
  }
  return {
    ca: services.ca,
    sink: services.server('sink', LOOPBACK),
    coordinator: {
      https: services.server(COORDINATOR_NAME, LOOPBACK),
      etcd: etcdPki.client(COORDINATOR_NAME, COORDINATOR_NAME),
      etcdUser: COORDINATOR_NAME,
    },
    etcd: {
      ca: etcdPki.ca,
      server: etcdPki.server('server', LOOPBACK),
      root: etcdPki.client('root', 'root'),
    },
    removed,
  };
}
