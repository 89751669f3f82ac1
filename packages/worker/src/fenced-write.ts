/**
 * The fenced writes of one attempt: `ctx.write` to the sink, and `ctx.fencedTransaction` into the
 * user's own PostgreSQL through `@leasehold/fence-pg` (an optional peer, loaded on first use). Both
 * first check the worker's conservative deadline (a write the fence would refuse is not sent), call
 * the `beforeWrite` hook, and then record what landed: the attempt completes with the stored
 * result's id and no further write. A refusal by a newer token aborts the handler's signal.
 */
import {
  defaultResultId,
  LeaseholdError,
  type CapabilityPublicKey,
  type Grant,
  type JsonValue,
} from '@leasehold/protocol';
import type * as FencePgModule from '@leasehold/fence-pg';
import { context, type Context } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { LeaseLostError, WriteRefusedError } from './errors.js';
import type {
  FenceClientOf,
  FencedTransactionOptions,
  FencedTransactionOutcome,
  FencePool,
  SinkWriter,
  WriteHookInfo,
  WriteOptions,
  WriteOutcome,
} from './types.js';

/** Why a lease is given up when only the worker's own conservative deadline has passed. */
export const LOCAL_DEADLINE = 'local deadline passed';

export interface WriteDeps {
  readonly workerId: string;
  readonly incarnation: string;
  readonly sink: SinkWriter;
  readonly log: Logger;
  /** The lease is still valid by the worker's conservative clock. */
  readonly leaseValid: () => boolean;
  readonly remainingMs: () => number;
  readonly beforeWrite: ((info: WriteHookInfo) => void | Promise<void>) | undefined;
  readonly capabilityPublicKeys: readonly CapabilityPublicKey[] | undefined;
  readonly onWritten: (outcome: string) => void;
  readonly onRefused: (code: string) => void;
}

type FencePg = typeof FencePgModule;
let fencePg: Promise<FencePg> | undefined;

/** `@leasehold/fence-pg`, loaded once; a clear error when it is not installed. */
function loadFencePg(): Promise<FencePg> {
  fencePg ??= import('@leasehold/fence-pg').catch((err: unknown) => {
    fencePg = undefined;
    throw new LeaseholdError(
      'INTERNAL',
      'ctx.fencedTransaction needs @leasehold/fence-pg (and pg): install them next to @leasehold/worker',
      { cause: err, retryable: false },
    );
  });
  return fencePg;
}

export class AttemptWrites {
  readonly #deps: WriteDeps;
  readonly #grant: Grant;
  readonly #token: bigint;
  readonly #controller: AbortController;
  readonly #span: Context;
  #stored: WriteOutcome | undefined;
  /** The result id of the last write tried (a RESULT_CONFLICT completes the task with it). */
  lastResultId: string;

  constructor(deps: WriteDeps, grant: Grant, token: bigint, controller: AbortController, span: Context) {
    this.#deps = deps;
    this.#grant = grant;
    this.#token = token;
    this.#controller = controller;
    this.#span = span;
    this.lastResultId = defaultResultId(grant.taskId);
  }

  /** What landed, if anything did. */
  get stored(): WriteOutcome | undefined {
    return this.#stored;
  }

  /** Throws the abort reason, or LeaseLostError when the conservative deadline passed. */
  async #precheck(resultId: string): Promise<void> {
    this.lastResultId = resultId;
    const signal = this.#controller.signal;
    if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new LeaseLostError('aborted');
    if (!this.#deps.leaseValid()) {
      this.#controller.abort(new LeaseLostError(LOCAL_DEADLINE));
      throw new LeaseLostError(`${LOCAL_DEADLINE} before the write`);
    }
    await this.#deps.beforeWrite?.({
      taskId: this.#grant.taskId,
      resource: this.#grant.resource,
      token: this.#token,
      resultId,
    });
  }

  #refused(
    code: 'STALE_TOKEN' | 'FENCE_CONFLICT' | 'RESULT_CONFLICT',
    fence: bigint,
    where: 'sink' | 'postgres',
  ): void {
    this.#deps.log.warn(
      { code, fence: fence.toString() },
      where === 'sink' ? 'write refused by the sink' : 'fenced transaction refused',
    );
    this.#deps.onRefused(code);
    if (code !== 'RESULT_CONFLICT') this.#controller.abort(new WriteRefusedError(code, fence));
  }

  #landed(outcome: 'written' | 'replayed', resultId: string, fence: bigint, where: string): WriteOutcome {
    this.#stored = { outcome, resultId, fence };
    this.#deps.log.info(
      { resultId, outcome, where },
      where === 'sink' ? 'result written' : 'fenced transaction committed',
    );
    this.#deps.onWritten(outcome);
    return this.#stored;
  }

  /** `ctx.write`: the sink's fenced write. */
  async write(payload: JsonValue, options?: WriteOptions): Promise<WriteOutcome> {
    const resultId = options?.resultId ?? defaultResultId(this.#grant.taskId);
    await this.#precheck(resultId);
    const { workerId, incarnation } = this.#deps;
    const result = await context.with(this.#span, () =>
      this.#deps.sink.write({
        resource: this.#grant.resource,
        token: this.#token,
        resultId,
        workerId,
        incarnation,
        capability: this.#grant.capability,
        payload,
      }),
    );
    if (!result.ok) {
      this.#refused(result.code, result.fence, 'sink');
      throw new WriteRefusedError(result.code, result.fence);
    }
    return this.#landed(result.outcome, resultId, result.fence, 'sink');
  }

  /** `ctx.fencedTransaction`: the fence check and the user's statements in one PostgreSQL transaction. */
  async fencedTransaction<P extends FencePool, T extends JsonValue | undefined>(
    pool: P,
    callback: (client: FenceClientOf<P>) => Promise<T>,
    options?: FencedTransactionOptions,
  ): Promise<FencedTransactionOutcome<T>> {
    const keys = this.#deps.capabilityPublicKeys;
    if (keys === undefined || keys.length === 0) {
      throw new LeaseholdError(
        'INTERNAL',
        "ctx.fencedTransaction needs the worker's capabilityPublicKeys (the sink's CAPABILITY_PUBLIC_KEYS)",
        { retryable: false },
      );
    }
    const resultId = options?.resultId ?? defaultResultId(this.#grant.taskId);
    const { fencedTransaction } = await loadFencePg();
    await this.#precheck(resultId);
    const { workerId, incarnation } = this.#deps;
    // A paused holder's transaction must not hold the fence row (and so the takeover's advance)
    // past its lease: PostgreSQL ends a session idle in a transaction for longer than this.
    const idleMs = Math.max(1, Math.ceil(this.#deps.remainingMs()));
    const outcome = await context.with(this.#span, () =>
      fencedTransaction(
        pool as unknown as Parameters<FencePg['fencedTransaction']>[0],
        {
          resource: this.#grant.resource,
          token: this.#token,
          capability: this.#grant.capability,
          workerId,
          incarnation,
          resultId,
          capabilityPublicKeys: keys,
          idleInTransactionTimeoutMs: idleMs,
          ...(options?.maxAttempts === undefined ? {} : { maxAttempts: options.maxAttempts }),
        },
        callback as unknown as (client: unknown) => Promise<T>,
      ),
    );
    if (!outcome.ok) this.#refused(outcome.code, outcome.fence, 'postgres');
    else this.#landed(outcome.outcome, resultId, outcome.fence, 'postgres');
    return outcome;
  }
}
