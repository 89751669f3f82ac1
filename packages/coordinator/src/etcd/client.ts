/**
 * The etcd3 client, configured for leasehold:
 * - several endpoints; a per-host circuit breaker moves calls away from a dead member — opened
 *   only by unavailability (UNAVAILABLE: connection refused or lost; DEADLINE_EXCEEDED), never by
 *   an answer: a reply over the receive limit, NOSPACE, "too many requests", a permission or a
 *   compare failure leave the breaker (and the other calls on that member) alone;
 * - etcd3 closes every gRPC channel of a member (watches and keepalives included) on any error it
 *   deems recoverable, RESOURCE_EXHAUSTED among them. Those are answers of one call (a reply too
 *   large, NOSPACE), so {@link AnswerPolicy} hands them on as {@link EtcdAnswer}, which etcd3 does
 *   not deem recoverable: the channels stay up;
 * - NO global retry policy: etcd3's default (cockatiel retry x3) can resend a txn whose reply was
 *   lost, executing it twice. Retries happen only in `readPolicy`, for idempotent calls;
 * - every unary call has a gRPC deadline; streams (watch, keepalive) have none and are supervised;
 * - the gRPC receive limit is `maxResponseBytes` (ETCD_MAX_RESPONSE_BYTES), not gRPC's 4 MiB:
 *   every read pages well under it (`Kv.rangePages`), so a reply over it is a bug of one read.
 */
import {
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleWhen,
  noop,
  type CircuitBreakerPolicy,
  type IBackoff,
  type IDefaultPolicyContext,
  type IPolicy,
} from 'cockatiel';
import { Etcd3, GRPCDeadlineExceededError, GRPCResourceExhastedError, GRPCUnavailableError } from 'etcd3';

export interface EtcdClientOptions {
  readonly endpoints: readonly string[];
  readonly requestTimeoutMs: number;
  /** gRPC receive limit: the largest reply accepted (bytes). */
  readonly maxResponseBytes: number;
  /** TLS to etcd: the CA of its certificate, and a client certificate for client-cert auth. */
  readonly tls?: { readonly ca: Buffer; readonly cert?: Buffer; readonly key?: Buffer };
  /** etcd user and password (etcd auth). */
  readonly auth?: { readonly username: string; readonly password: string };
}

/** The one predicate of the breaker: etcd did not answer (a member down, cut off or too slow). */
export function isUnavailability(err: unknown): boolean {
  return err instanceof GRPCUnavailableError || err instanceof GRPCDeadlineExceededError;
}

/**
 * etcd (or the client's own limit) answered one call with RESOURCE_EXHAUSTED: the original error
 * in `cause`. Not an etcd3 "recoverable" error, so etcd3 keeps the member's channels open.
 */
export class EtcdAnswer extends Error {
  override name = 'EtcdAnswer';

  constructor(original: Error) {
    super(original.message, { cause: original });
  }
}

/** The per-host policy: the breaker, with RESOURCE_EXHAUSTED answers handed on as {@link EtcdAnswer}. */
export class AnswerPolicy implements IPolicy {
  declare readonly _altReturn: never;
  readonly #breaker: CircuitBreakerPolicy;

  constructor(breaker: CircuitBreakerPolicy) {
    this.#breaker = breaker;
  }

  get onSuccess(): CircuitBreakerPolicy['onSuccess'] {
    return this.#breaker.onSuccess;
  }

  get onFailure(): CircuitBreakerPolicy['onFailure'] {
    return this.#breaker.onFailure;
  }

  async execute<T>(fn: (context: IDefaultPolicyContext) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
    try {
      return await this.#breaker.execute(fn, signal);
    } catch (err) {
      throw err instanceof GRPCResourceExhastedError ? new EtcdAnswer(err) : err;
    }
  }
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
        new AnswerPolicy(
          circuitBreaker(handleWhen(isUnavailability), { halfOpenAfter: 1_000, breaker: new ConsecutiveBreaker(3) }),
        ),
      // etcd3 types this as a backoff but calls `.next()` on it: it is really the factory.
      watchBackoff: new ExponentialBackoff({ initialDelay: 50, maxDelay: 1_000 }) as unknown as IBackoff<unknown>,
    },
    grpcOptions: {
      'grpc.keepalive_time_ms': 5_000,
      'grpc.keepalive_timeout_ms': 2_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': options.maxResponseBytes,
    },
  });
}
