/**
 * The runner's own etcd3 client, shared by the history replay (`collect.ts`) and the live owner
 * watch (`live-watch.ts`): TLS credentials when the cluster requires client certificates, and a
 * receive limit large enough for a watch that catches up on many revisions in one response.
 */
import { Etcd3 } from 'etcd3';
import type { EtcdClientTls } from '../harness/etcd-settings.js';

export type { EtcdClientTls } from '../harness/etcd-settings.js';

/** Largest watch response the history replay and the live watch accept (see readEtcdHistory). */
export const HISTORY_MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/** etcd3 client options for `tls` (none for plaintext). */
export function etcdCredentials(tls: EtcdClientTls | undefined): {
  credentials?: { rootCertificate: Buffer; certChain: Buffer; privateKey: Buffer };
} {
  return tls === undefined
    ? {}
    : { credentials: { rootCertificate: tls.ca, certChain: tls.cert, privateKey: tls.key } };
}

/**
 * A client of `hosts` for reading history: catching up from an old revision, etcd sends many
 * revisions' events in one response; past gRPC's default 4 MiB (~10k task records, or a member
 * that was cut off with payload keys in the range) the stream fails and reconnects forever.
 */
export function historyEtcdClient(hosts: readonly string[], tls: EtcdClientTls | undefined): Etcd3 {
  return new Etcd3({
    hosts: [...hosts],
    dialTimeout: 3_000,
    grpcOptions: { 'grpc.max_receive_message_length': HISTORY_MAX_MESSAGE_BYTES },
    ...etcdCredentials(tls),
  });
}
