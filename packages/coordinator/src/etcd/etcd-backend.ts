/**
 * {@link KvBackend} on a real etcd through the etcd3 client. The only file (with keepalive.ts and
 * client.ts) that sees etcd3 types: compares, ops and key-values are converted here, and every
 * etcd3 / gRPC error is cast here, once, into an {@link EtcdError} whose `failure` says how the call
 * failed ({@link classifyEtcdError}): only `unavailable` is transient.
 */
import { isBrokenCircuitError } from 'cockatiel';
import {
  ClientRuntimeError,
  EtcdLeaseInvalidError,
  EtcdPermissionDeniedError,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  GRPCAbortedError,
  GRPCCancelledError,
  GRPCDeadlineExceededError,
  GRPCInternalError,
  GRPCUnauthenticatedError,
  GRPCUnavailableError,
  GRPCUnknownError,
  type Etcd3,
  type ICompare,
  type IDeleteRangeRequest,
  type IKeyValue,
  type IPutRequest,
  type IRangeRequest,
  type IRangeResponse,
  type IRequestOp,
  type IResponseOp,
  type ITxnRequest,
  type ITxnResponse,
  type IWatchResponse,
} from 'etcd3';
import { EtcdError, EtcdRefusedError, EtcdUnavailableError, type EtcdFailure } from '../errors.js';
import type {
  BackendStatus,
  Compare,
  KeyRange,
  KeyValue,
  KvBackend,
  LeaseKeeper,
  LeaseKeeperOptions,
  Op,
  OpResult,
  RangeOptions,
  RangePage,
  TxnResult,
  TxnSpec,
  WatchHandle,
  WatchListener,
} from './backend.js';
import { createEtcdClient, EtcdAnswer, type EtcdClientOptions } from './client.js';
import { readPolicy } from './errors.js';
import { KeepAliveStream } from './keepalive.js';
import { prefixEnd } from './keys.js';
import type { Logger } from 'pino';

/**
 * How an etcd3 / gRPC error failed: etcd's own answers by their message (gRPC codes are shared by
 * unrelated failures: RESOURCE_EXHAUSTED is NOSPACE, "too many requests" and the client's receive
 * limit alike), then unavailability by class.
 */
export function classifyEtcdError(err: unknown): EtcdFailure {
  const inner = err instanceof EtcdAnswer ? err.cause : err;
  const message = inner instanceof Error ? inner.message : String(inner);
  if (/database space exceeded/i.test(message)) return 'no-space';
  // etcd's gRPC server (grpc-go) refusing a request over its receive limit (--max-request-bytes +
  // 512 KiB), before reading it: "grpc: received message larger than max". The client's own
  // receive limit on a reply (grpc-js) says "Received message larger than max", without "grpc:".
  if (/grpc: received message (after decompression )?larger than max/i.test(message)) return 'request-too-large';
  if (/received message larger than max/i.test(message)) return 'response-too-large';
  if (/sent message larger than max|request is too large/i.test(message)) return 'request-too-large';
  if (/too many operations in txn/i.test(message)) return 'too-many-ops';
  if (/duplicate key given in txn request/i.test(message)) return 'duplicate-key';
  if (/required revision has been compacted/i.test(message)) return 'compacted';
  if (isLeaseNotFound(inner)) return 'lease-not-found';
  if (
    inner instanceof EtcdPermissionDeniedError ||
    inner instanceof EtcdAuthenticationFailedError ||
    inner instanceof EtcdInvalidAuthTokenError ||
    inner instanceof GRPCUnauthenticatedError ||
    /permission denied|authentication failed|user name (not found|is empty)/i.test(message)
  ) {
    return 'permission-denied';
  }
  // etcd overloaded ("too many requests") or a connection in trouble: try again, elsewhere.
  if (
    /too many requests/i.test(message) ||
    inner instanceof GRPCUnavailableError ||
    inner instanceof GRPCDeadlineExceededError ||
    inner instanceof GRPCCancelledError ||
    inner instanceof GRPCAbortedError ||
    inner instanceof GRPCInternalError ||
    inner instanceof GRPCUnknownError ||
    inner instanceof ClientRuntimeError ||
    isBrokenCircuitError(inner)
  ) {
    return 'unavailable';
  }
  return 'other';
}

/** The etcd error as the coordinator's own, cast once. */
export function castEtcdError(err: unknown, what: string): EtcdError {
  if (err instanceof EtcdError) return err;
  const inner = err instanceof EtcdAnswer ? err.cause : err;
  const detail = inner instanceof Error ? `${inner.constructor.name}: ${inner.message}` : String(inner);
  const message = `etcd ${what} failed: ${detail}`;
  const failure = classifyEtcdError(err);
  return failure === 'unavailable'
    ? new EtcdUnavailableError(message, { cause: inner, transient: true })
    : new EtcdRefusedError(failure, message, { cause: inner });
}

/** The lease named in a request no longer exists (expired or revoked). */
function isLeaseNotFound(err: unknown): boolean {
  return (
    err instanceof EtcdLeaseInvalidError || (err instanceof Error && /requested lease not found/.test(err.message))
  );
}

const buf = (key: string): Buffer => Buffer.from(key);

const TARGET = { create: 'Create', mod: 'Mod', version: 'Version', lease: 'Lease' } as const;
const RESULT = { equal: 'Equal', greater: 'Greater', less: 'Less', 'not-equal': 'NotEqual' } as const;

/*
 * The request objects handed to etcd3 (and by grpc-js to protobufjs's `fromObject`, which reads
 * every field of every message) are built with ONE shape per message type: every field present,
 * `undefined` where unused (`fromObject` skips `!= null`), always in the same order. Objects built
 * with conditional spreads had up to eight shapes per type, which made `fromObject`'s property
 * loads megamorphic: building and serializing requests fell from 9.2 % to 5.5 % of the
 * coordinator's CPU under the cycle (the twentieth step of issue 27 in docs/benchmarks.md). A
 * revision goes as a number when it is exact in one (protobufjs then skips parsing a decimal
 * string); lease ids stay strings (they are 64-bit).
 */
type Uniform<T> = { [K in keyof T]-?: T[K] | undefined };

const MAX_EXACT = BigInt(Number.MAX_SAFE_INTEGER);
const int64 = (v: bigint): number | string => (v <= MAX_EXACT ? Number(v) : v.toString());
/** `range_end` of a key or, with `prefix`, of every key under it. */
const rangeEnd = (key: string, prefix: boolean | undefined): Buffer | undefined =>
  prefix === true ? prefixEnd(key) : undefined;

function toCompare(c: Compare): ICompare {
  const value = typeof c.value === 'bigint' ? int64(c.value) : c.value;
  const compare: Uniform<ICompare> = {
    result: RESULT[c.result],
    target: TARGET[c.target],
    key: buf(c.key),
    version: c.target === 'version' ? value : undefined,
    create_revision: c.target === 'create' ? value : undefined,
    mod_revision: c.target === 'mod' ? value : undefined,
    value: undefined,
    lease: c.target === 'lease' ? value : undefined,
    range_end: rangeEnd(c.key, c.prefix),
  };
  return compare as ICompare;
}

function toOp(o: Op): IRequestOp {
  const op: Uniform<IRequestOp> = {
    request_range: undefined,
    request_put: undefined,
    request_delete_range: undefined,
    request_txn: undefined,
  };
  switch (o.type) {
    case 'txn':
      op.request_txn = toTxnRequest(o.txn);
      break;
    case 'put': {
      const put: Uniform<IPutRequest> = {
        key: buf(o.key),
        value: Buffer.from(o.value),
        lease: o.lease,
        prev_kv: undefined,
        ignore_value: undefined,
        ignore_lease: undefined,
      };
      op.request_put = put as IPutRequest;
      break;
    }
    case 'get': {
      const range: Uniform<IRangeRequest> = {
        key: buf(o.key),
        range_end: rangeEnd(o.key, o.prefix),
        limit: undefined,
        revision: undefined,
        sort_order: undefined,
        sort_target: undefined,
        serializable: undefined,
        keys_only: undefined,
        count_only: undefined,
        min_mod_revision: undefined,
        max_mod_revision: undefined,
        min_create_revision: undefined,
        max_create_revision: undefined,
      };
      op.request_range = range as IRangeRequest;
      break;
    }
    case 'delete': {
      const range: Uniform<IDeleteRangeRequest> = {
        key: buf(o.key),
        range_end: rangeEnd(o.key, o.prefix),
        prev_kv: undefined,
      };
      op.request_delete_range = range as IDeleteRangeRequest;
      break;
    }
  }
  return op as IRequestOp;
}

export function toTxnRequest(spec: TxnSpec): ITxnRequest {
  return {
    compare: spec.compare.map(toCompare),
    success: spec.success.map(toOp),
    failure: (spec.failure ?? []).map(toOp),
  };
}

/** An op's result: a range's kvs, a nested txn's outcome (typed as always present, but only one is). */
function fromResponseOp(r: IResponseOp): OpResult {
  const nested = r.response_txn as ITxnResponse | null | undefined;
  if (nested !== undefined && nested !== null) {
    return { kvs: [], txn: { succeeded: nested.succeeded, responses: nested.responses.map(fromResponseOp) } };
  }
  return { kvs: ((r.response_range as IRangeResponse | undefined)?.kvs ?? []).map(fromKv) };
}

export function fromKv(kv: IKeyValue): KeyValue {
  return {
    key: kv.key.toString(),
    value: kv.value.toString(),
    createRevision: BigInt(kv.create_revision),
    modRevision: BigInt(kv.mod_revision),
    version: BigInt(kv.version),
    lease: kv.lease,
  };
}

export interface EtcdBackendOptions extends EtcdClientOptions {
  readonly log: Logger;
}

export class EtcdBackend implements KvBackend {
  readonly client: Etcd3;
  readonly #log: Logger;

  constructor(options: EtcdBackendOptions) {
    this.client = createEtcdClient(options);
    this.#log = options.log;
  }

  async txn(spec: TxnSpec): Promise<TxnResult> {
    try {
      const res = await this.client.kv.txn(toTxnRequest(spec));
      return {
        succeeded: res.succeeded,
        revision: BigInt(res.header.revision),
        responses: res.responses.map(fromResponseOp),
      };
    } catch (err) {
      throw castEtcdError(err, 'txn');
    }
  }

  async range(prefix: string, options: RangeOptions): Promise<RangePage> {
    try {
      const page = await this.client.kv.range({
        key: buf(options.fromKey ?? prefix),
        range_end: prefixEnd(prefix),
        limit: options.limit,
        ...(options.revision === undefined ? {} : { revision: options.revision.toString() }),
      });
      return { kvs: page.kvs.map(fromKv), more: page.more, revision: BigInt(page.header.revision) };
    } catch (err) {
      throw castEtcdError(err, 'range');
    }
  }

  async status(): Promise<BackendStatus> {
    try {
      const res = await this.client.maintenance.status();
      // Typed as always there, but absent from a reply without alarms.
      const errors = res.errors as readonly string[] | undefined;
      return { dbSizeBytes: Number(res.dbSize), noSpaceAlarm: errors?.some((e) => /NOSPACE/.test(e)) === true };
    } catch (err) {
      throw castEtcdError(err, 'status');
    }
  }

  async grantLease(ttlSeconds: number): Promise<string> {
    try {
      return (await this.client.leaseClient.leaseGrant({ TTL: ttlSeconds })).ID;
    } catch (err) {
      throw castEtcdError(err, 'lease grant');
    }
  }

  async revokeLease(leaseId: string): Promise<void> {
    await readPolicy('lease revoke', async () => {
      try {
        await this.client.leaseClient.leaseRevoke({ ID: leaseId });
      } catch (err) {
        if (!isLeaseNotFound(err)) throw castEtcdError(err, 'lease revoke');
      }
    });
  }

  leaseKeeper(options: LeaseKeeperOptions): LeaseKeeper {
    return new KeepAliveStream(this.client.leaseClient, {
      ...options,
      log: this.#log.child({ component: 'keepalive' }),
    });
  }

  async watch(range: KeyRange, fromRevision: bigint, listener: WatchListener): Promise<WatchHandle> {
    const watcher = await this.client
      .watch()
      .inRange({ start: range.start, end: prefixEnd(range.endPrefix) })
      .startRevision(fromRevision.toString())
      .create();
    watcher.on('data', (res: IWatchResponse) => {
      listener.onEvents(
        res.events.map((ev) => ({ type: ev.type === 'Delete' ? 'delete' : 'put', kv: fromKv(ev.kv) })),
        BigInt(res.header.revision),
      );
    });
    watcher.on('error', (err: unknown) => {
      listener.onError(err);
    });
    watcher.on('disconnected', (err: unknown) => {
      listener.onDisconnected?.(err);
    });
    return {
      cancel: async () => {
        watcher.removeAllListeners();
        watcher.on('error', () => undefined);
        await watcher.cancel().catch(() => undefined);
      },
    };
  }

  close(): void {
    this.client.close();
  }
}
