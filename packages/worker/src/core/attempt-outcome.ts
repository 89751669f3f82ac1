/**
 * How an attempt ends, decided from facts alone (pure; table-tested in attempt-outcome.test.ts).
 * The attempt runner gathers the facts (what the handler did, what the sink or fence-pg said, why
 * the handler's signal fired, whether the worker is closing) and carries the decision out: write
 * the returned value, complete the task, give the lease back, report the failure, or let the lease
 * go to the next holder.
 *
 * Safety never rests on this: a stale holder's write is refused by the fence, and its
 * `task.complete` by the coordinator (the owner key's create revision must be the token).
 */

/** Why the handler's signal fired, if it did. */
export type AbortCause =
  | 'none'
  /** The worker is closing and the grace time ran out. */
  | 'shutdown'
  /** Only the worker's own conservative clock says the lease may be gone. */
  | 'local-deadline'
  /** The coordinator said so (revoked, session expired) or a fenced write was refused. */
  | 'lost';

/** What was thrown, classified. */
export type ErrorKind =
  | 'none'
  /** LeaseLostError: the lease is gone or may be. */
  | 'lease-lost'
  /** A fenced write refused STALE_TOKEN / FENCE_CONFLICT: a newer holder has the resource. */
  | 'write-refused'
  /** RESULT_CONFLICT: the result id already holds a (different) result — an earlier holder's. */
  | 'result-conflict'
  /** Anything else: the handler's own failure (or the sink unreachable). */
  | 'handler';

export interface AttemptFacts {
  readonly ended: 'returned' | 'threw';
  /** It returned a value other than `undefined` (a result to write). */
  readonly returnedValue: boolean;
  /** A result of this attempt is stored already (`ctx.write`, or a committed `ctx.fencedTransaction`). */
  readonly stored: boolean;
  readonly error: ErrorKind;
  readonly aborted: AbortCause;
  /** A thrown LeaseLostError names the local deadline (the abort cause wins when there is one). */
  readonly errorIsLocalDeadline: boolean;
  /** The worker is closing. */
  readonly stopping: boolean;
}

export type AttemptDecision =
  /** Write the returned value to the sink under the grant's token, then decide again. */
  | { readonly kind: 'write' }
  /** `task.complete`: with this attempt's stored result, with none (side effects only), or the earlier holder's. */
  | { readonly kind: 'complete'; readonly result: 'stored' | 'none' | 'earlier' }
  /** `lease.release`: the attempt is given back and does not count. */
  | { readonly kind: 'release'; readonly reason: 'shutdown' }
  /**
   * The lease is gone: report nothing, the next holder takes the task. `release`: only our own clock
   * said so, and the coordinator may still count the lease ours (a welcome that came late leaves
   * the local deadline behind until the first heartbeat ack): give it back, or the task stays leased
   * for as long as this session lives. A lease really gone refuses the release, which changes nothing.
   */
  | { readonly kind: 'lost'; readonly release: boolean }
  /** `task.fail`: the coordinator retries after the task's backoff, or fails it. */
  | { readonly kind: 'fail' };

export function decideAttemptEnd(f: AttemptFacts): AttemptDecision {
  if (f.ended === 'returned') {
    if (f.stored) return { kind: 'complete', result: 'stored' };
    if (f.returnedValue) return { kind: 'write' };
    // Nothing to write: a side-effect-only task is done — unless the coordinator already said the
    // lease is gone (then its completion would be refused anyway; the next holder runs it).
    if (f.aborted === 'lost') return { kind: 'lost', release: false };
    return { kind: 'complete', result: 'none' };
  }
  if (f.error === 'result-conflict') return { kind: 'complete', result: 'earlier' };
  if (f.stopping && f.aborted === 'shutdown') return { kind: 'release', reason: 'shutdown' };
  if (f.error === 'lease-lost' || f.error === 'write-refused' || f.aborted !== 'none') {
    const localOnly = f.aborted === 'local-deadline' || (f.aborted === 'none' && f.errorIsLocalDeadline);
    return { kind: 'lost', release: localOnly };
  }
  return { kind: 'fail' };
}
