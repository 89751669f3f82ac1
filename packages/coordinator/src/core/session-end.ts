/**
 * The plan for ending a session at its deadline, as a pure state machine: the shell
 * (`SessionManager`) performs each {@link EndAction} and reports what it saw; the plan decides the
 * next step. No I/O, no clock: the shell passes the time.
 *
 * 1. First attempt: the session's owner keys from the watch-fed index (no read), ended by one txn
 *    that also compares that no holding is newer than the index (a lagging index only fails it).
 * 2. Later attempts: the holdings read from the store.
 * 3. More owner keys than one txn may delete: mark the session ending (`close`); the lease revoke
 *    that follows deletes them at one revision.
 * 4. The session key is gone: it ended already; another mod_revision: a peer adopted it (do not
 *    end it, hand the worker over).
 * 5. A store error: retry with backoff until `giveUpAtMs`, then leave it to the lease backstop;
 *    a holdings list that keeps changing (more than `maxRounds` rounds): close instead.
 */
import type { CloseOutcome, EndOutcome, HeldOwner } from '../store/port.js';

export type EndResult = 'ended' | 'moved' | 'gone';

export type EndAction =
  /** Take the holdings from the index (with its revision as `knownUpTo`) and end with them. */
  | { readonly kind: 'endFromIndex' }
  /** Read the session and its holdings from the store. */
  | { readonly kind: 'readHoldings' }
  /** End with these holdings; `knownUpTo` when they came from an index complete up to it. */
  | { readonly kind: 'end'; readonly held: readonly HeldOwner[]; readonly knownUpTo?: bigint }
  | { readonly kind: 'close'; readonly held: readonly HeldOwner[] }
  | { readonly kind: 'wait'; readonly ms: number }
  | {
      readonly kind: 'finish';
      readonly result: EndResult;
      /** The owner keys the end removed (pushed to the worker as revoked). */
      readonly held: readonly HeldOwner[];
      /** Revoke the lease now (anything but 'moved': a peer serves the session). */
      readonly revoke: boolean;
      /** End revision, when the owners were deleted by the end txn (free them in the index). */
      readonly revision?: bigint;
    };

export type EndObservation =
  | { readonly kind: 'holdings'; readonly session: 'ours' | 'moved' | 'gone'; readonly held: readonly HeldOwner[] }
  | { readonly kind: 'ended'; readonly held: readonly HeldOwner[]; readonly outcome: EndOutcome }
  | { readonly kind: 'closed'; readonly held: readonly HeldOwner[]; readonly outcome: CloseOutcome }
  | { readonly kind: 'error'; readonly nowMs: number }
  | { readonly kind: 'waited' };

export interface EndPlanOptions {
  readonly maxOwnersPerTxn: number;
  /** Give up retrying store errors after this time (the lease TTL ends the session then). */
  readonly giveUpAtMs: number;
  /** Rounds of "holdings changed" before closing instead. */
  readonly maxRounds?: number;
}

export class SessionEndPlan {
  readonly #o: EndPlanOptions;
  #errors = 0;
  #rounds = 0;

  constructor(options: EndPlanOptions) {
    this.#o = options;
  }

  first(): EndAction {
    return { kind: 'endFromIndex' };
  }

  /** The index's holdings (complete up to `revision`) for the first attempt. */
  fromIndex(held: readonly HeldOwner[], revision: bigint): EndAction {
    const action = this.#endOrClose(held);
    return action.kind === 'end' ? { ...action, knownUpTo: revision } : action;
  }

  next(seen: EndObservation): EndAction {
    switch (seen.kind) {
      case 'holdings':
        if (seen.session === 'gone') return finish('gone', [], true);
        if (seen.session === 'moved') return finish('moved', [], false);
        return this.#endOrClose(seen.held);
      case 'ended':
        switch (seen.outcome.kind) {
          case 'ended':
            return finish('ended', seen.held, true, seen.outcome.revision);
          case 'gone':
            return finish('gone', [], true);
          case 'moved':
            return finish('moved', [], false);
          case 'changed':
            this.#rounds += 1;
            return { kind: 'readHoldings' };
        }
        break;
      case 'closed':
        switch (seen.outcome.kind) {
          case 'closed':
            return finish('ended', seen.held, true);
          case 'gone':
            return finish('gone', [], true);
          case 'moved':
            return finish('moved', [], false);
        }
        break;
      case 'error':
        this.#errors += 1;
        if (seen.nowMs > this.#o.giveUpAtMs) return finish('gone', [], true);
        return { kind: 'wait', ms: Math.min(500, 25 * 2 ** Math.min(this.#errors - 1, 5)) };
      case 'waited':
        return { kind: 'readHoldings' };
    }
  }

  #endOrClose(held: readonly HeldOwner[]): EndAction {
    const tooMany = held.length > this.#o.maxOwnersPerTxn || this.#rounds >= (this.#o.maxRounds ?? 8);
    return tooMany ? { kind: 'close', held } : { kind: 'end', held };
  }
}

function finish(result: EndResult, held: readonly HeldOwner[], revoke: boolean, revision?: bigint): EndAction {
  return { kind: 'finish', result, held, revoke, ...(revision === undefined ? {} : { revision }) };
}
