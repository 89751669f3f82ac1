/**
 * The types a handler sees: the task, its context (the grant's proof, the AbortSignal, the fenced
 * writes) and the handler itself, typed by payload and result (`TaskHandler<Payload, Result>`,
 * after BullMQ's `Processor<Data, Result>`).
 */
import type { FencedTransactionOutcome, JsonValue } from '@leasehold/protocol';
import type { SinkClient } from '@leasehold/sink-client';
import type { Logger } from 'pino';

export interface Task<Payload = JsonValue> {
  readonly taskId: string;
  readonly resource: string;
  /** The submitted payload; validated by the worker's `payload` schema when it has one. */
  readonly payload: Payload;
  /** 1 for the first grant of the task, 2 for the first retry, ... */
  readonly attempt: number;
}

/**
 * The proof of this grant: what a fenced write target checks before it takes a write. Pass it to
 * `fencedTransaction` of `@leasehold/fence-pg` (with your `capabilityPublicKeys`), or to a service
 * of yours that fences its own store.
 */
export interface GrantProof {
  readonly taskId: string;
  readonly resource: string;
  /** The fencing token: the etcd revision of this grant. */
  readonly token: bigint;
  /** The coordinator's Ed25519 signature over (resource, token, workerId, incarnation). */
  readonly capability: string;
  readonly workerId: string;
  readonly incarnation: string;
  readonly attempt: number;
  /** The default idempotency key of the task's result: `task:<taskId>` (its business identity). */
  readonly resultId: string;
}

export interface WriteOptions {
  /** Idempotency key. Defaults to `task:<taskId>` (the business identity, never random). */
  readonly resultId?: string;
}

export interface WriteOutcome {
  readonly outcome: 'written' | 'replayed';
  readonly resultId: string;
  readonly fence: bigint;
}

/**
 * A PostgreSQL pool as `ctx.fencedTransaction` uses it: a `pg.Pool` (structural, so this package's
 * types need no `pg`).
 */
export interface FencePool {
  connect(): Promise<unknown>;
}

/** The client a pool hands out (`pg.PoolClient` for a `pg.Pool`). */
export type FenceClientOf<P> = P extends {
  connect(): Promise<infer C>;
  connect(callback: (...args: never[]) => void): void;
}
  ? C
  : P extends { connect(): Promise<infer C> }
    ? C
    : never;

export interface FencedTransactionOptions {
  /** Idempotency key of the stored result. Default `task:<taskId>`. */
  readonly resultId?: string;
  /** Attempts on a deadlock / serialization failure. Default 5 (fence-pg's). */
  readonly maxAttempts?: number;
}

/** What `ctx.fencedTransaction` answers (the outcome of `fencedTransaction` from `@leasehold/fence-pg`). */
export type { FencedTransactionOutcome };

export interface TaskContext {
  /** The grant's proof (resource, token, capability, worker id, incarnation, attempt). */
  readonly grant: GrantProof;
  /** `grant.resource`. */
  readonly resource: string;
  /** `grant.token`. */
  readonly token: bigint;
  /** Fires when the lease is lost or may be: session expired, revoked, coordinator unreachable past the deadline, shutdown. */
  readonly signal: AbortSignal;
  /**
   * Fenced write of a result to the sink. Throws LeaseLostError / WriteRefusedError when it cannot
   * land. Once a write landed, the handler's return value is not written again.
   */
  write(payload: JsonValue, options?: WriteOptions): Promise<WriteOutcome>;
  /**
   * Your own statements in ONE PostgreSQL transaction with the fence check, the capability check
   * and the idempotency check (`fencedTransaction` of `@leasehold/fence-pg`, an optional peer of
   * this package: install it and `pg`). The callback's JSON return value is the task's result,
   * stored under `resultId` in your database; committed (`written` / `replayed`), the task
   * completes with no sink write. A refusal is data (`STALE_TOKEN`: a newer holder has the
   * resource; none of your writes committed) and aborts `signal`. Needs the worker's
   * `capabilityPublicKeys`. A paused worker's open transaction is ended by PostgreSQL once it was
   * idle for the lease's remaining time (`idle_in_transaction_session_timeout`), so it cannot
   * hold the fence row's lock past its lease.
   */
  fencedTransaction<P extends FencePool, T extends JsonValue | undefined>(
    pool: P,
    callback: (client: FenceClientOf<P>) => Promise<T>,
    options?: FencedTransactionOptions,
  ): Promise<FencedTransactionOutcome<T>>;
  /** Milliseconds left on the worker's conservative view of the lease. */
  remainingMs(): number;
  readonly logger: Logger;
}

/**
 * A handler: return the result to write to the sink (under the grant's token), or nothing (a
 * side-effect-only task, or one that stored its result with `ctx.write` / `ctx.fencedTransaction`).
 * A throw fails the attempt (retried after the task's backoff); a NonRetryableError fails the task.
 */
export type TaskHandler<Payload = JsonValue, Result = JsonValue> = (
  task: Task<Payload>,
  ctx: TaskContext,
  // `void`: an `async (task) => { ... }` without a return is a side-effect-only handler.
  // eslint-disable-next-line @typescript-eslint/no-invalid-void-type
) => Promise<Result | undefined | void> | Result | undefined | void;

/** A typed handler for a handler module (`export const handler = defineHandler<In, Out>(...)`). */
export function defineHandler<Payload = JsonValue, Result = JsonValue>(
  handler: TaskHandler<Payload, Result>,
): TaskHandler<Payload, Result> {
  return handler;
}

export interface WriteHookInfo {
  readonly taskId: string;
  readonly resource: string;
  readonly token: bigint;
  readonly resultId: string;
}

/** What the worker needs of the sink: a fenced write (a {@link SinkClient}, or a test double). */
export type SinkWriter = Pick<SinkClient, 'write' | 'close'> & Partial<Pick<SinkClient, 'health'>>;

/**
 * How the worker proves who it is: its own credential (a key id and secret the coordinators bind
 * to this worker id), a client certificate (`tls.cert` / `tls.key`: pass `{ certificate: true }`),
 * or — INSECURE, for local development only — a shared key with which any worker may claim any id.
 */
export type WorkerCredentials =
  { readonly keyId: string; readonly secret: string } | { readonly certificate: true } | { readonly workerKey: string };

/** Counts since the worker started (a snapshot: read `worker.stats` again for newer ones). */
export interface WorkerStats {
  readonly granted: number;
  readonly completed: number;
  /** Handler failures reported to the coordinator. */
  readonly failed: number;
  readonly refused: number;
  readonly released: number;
  readonly lost: number;
}
