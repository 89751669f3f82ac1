/**
 * The etcd3 client, configured for leasehold:
 * - several endpoints; a per-host circuit breaker moves calls away from a dead member;
 * - NO global retry policy: etcd3's default (cockatiel retry x3) can resend a txn whose reply was
 *   lost, executing it twice. Retries happen only in {@link withRetry}, for idempotent calls;
 * - every unary call has a gRPC deadline; streams (watch, keepalive) have none and are supervised.
 */
import { circuitBreaker, ConsecutiveBreaker, ExponentialBackoff, handleWhen, noop, type IBackoff } from 'cockatiel';
import { Etcd3, isRecoverableError } from 'etcd3';

export interface EtcdClientOptions {
  readonly endpoints: readonly string[];
  readonly requestTimeoutMs: number;
  /** TLS to etcd: the CA of its certificate, and a client certificate for client-cert auth. */
  readonly tls?: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
  /** etcd user and password (etcd auth). */
  readonly auth?: { readonly username: string; readonly password: string };
}

export function createEtcdClient(options: EtcdClientOptions): Etcd3 {
  const tls = options.tls;
  return new Etcd3({
    hosts: [...options.endpoints],
    ...(tls === undefined
      ? {}
      : {
          credentials: {
            rootCertificate: tls.ca,
            ...(tls.cert === undefined || tls.key === undefined ? {} : { certChain: tls.cert, privateKey: tls.key }),
          },
        }),
    ...(options.auth === undefined
      ? {}
      : { auth: { username: options.auth.username, password: options.auth.password } }),
    dialTimeout: options.requestTimeoutMs,
    defaultCallOptions: (context) => (context.isStream ? {} : { deadline: Date.now() + options.requestTimeoutMs }),
    faultHandling: {
      global: noop,
      host: () =>
        circuitBreaker(handleWhen(isRecoverableError), {
          halfOpenAfter: 1_000,
          breaker: new ConsecutiveBreaker(3),
        }),
      // etcd3 types this as a backoff but calls `.next()` on it: it is really the factory.
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }) as unknown as IBackoff<unknown>,
    },
    grpcOptions: {
      'grpc.keepalive_time_ms': 5_000,
      'grpc.keepalive_timeout_ms': 2_000,
      'grpc.keepalive_permit_without_calls': 1,
    },
  });
}
