/**
 * The end of a session at its deadline, performed: the steps are decided by the pure
 * {@link SessionEndPlan} (core/session-end.ts); this shell runs each against the store and the
 * index, then tells the worker. Only the coordinator that still serves the session ends it (the
 * end txn compares the session key's mod_revision); a peer that adopted it meanwhile keeps it.
 */
import { formatToken, type Clock, type RepeatGate } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { SessionRecord } from '../core/records.js';
import { holdingsState } from '../core/session-resume.js';
import { SessionEndPlan, type EndAction, type EndObservation } from '../core/session-end.js';
import type { OwnerEntry, TaskIndex } from '../core/task-index.js';
import type { Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { EndArgs, EndOutcome, HeldOwner, LeaseStore, SettleArgs } from '../store/port.js';
import { CLOSE_SESSION_MOVED } from '../core/dispatch.js';
import type { LocalSession } from './local-session.js';

export interface SessionEndContext {
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly repeats: RepeatGate;
  readonly metrics: Pick<Metrics, 'expiries'>;
  readonly store: Pick<LeaseStore, 'limits' | 'sessionHoldings' | 'closeSession' | 'revokeLease'>;
  /**
   * The end txn of one session (`LeaseStore.endSession`), through a group commit: the sessions of
   * an expiry wave whose ends arrive together share a txn, each judged on its own.
   */
  readonly end: (args: EndArgs) => Promise<EndOutcome>;
  readonly index: Pick<TaskIndex, 'ownersOf' | 'revision' | 'freeOwner'>;
  /** How long the end waits for the session's requests in flight (the sink timeout and a margin). */
  readonly inflightGraceMs: number;
  /** TTL of the session's etcd lease: store errors are retried for twice as long, then left to it. */
  readonly leaseTtlSeconds: number;
  /** Records the attempts the end loses in the end's own txn (absent: each is settled after it). */
  readonly settlements?: EndSettlements;
}

/**
 * The attempts an end loses, recorded by the end txn itself (the settle service): a takeover then
 * need not wait for a settlement txn and its watch event before the task is grantable again.
 */
export interface EndSettlements {
  /** The settlements the end of these owner keys can carry (open attempts at those tokens). */
  foldable(held: readonly HeldOwner[]): SettleArgs[];
  /** The end txn carrying them landed at `revision`. */
  folded(settled: readonly SettleArgs[], revision: bigint): void;
}

/** What the session registry does for an end: forget the session here, build its record, free owners. */
export interface SessionEndHooks {
  /** The end is decided: the session is not served here any more. */
  finished(session: LocalSession): void;
  /** The session's record as this coordinator writes it (`closeSession` marks it ending). */
  record(session: LocalSession): SessionRecord;
  /** Owner keys the end txn deleted, dropped from the index: waiting acquires may be granted now. */
  ownersFreed(freed: readonly OwnerEntry[]): void;
}

export function delay(timers: Timers, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    timers.setTimeout(resolve, ms);
  });
}

/**
 * The deadline passed: end the session in the store (if still ours), tell the worker, revoke its
 * lease. Waiting acquires are woken and requests in flight waited for (bounded) first.
 */
export async function endAtDeadline(
  session: LocalSession,
  ctx: SessionEndContext,
  hooks: SessionEndHooks,
): Promise<void> {
  const { sessionId } = session;
  const log = ctx.log.child({ sessionId, workerId: session.workerId });
  for (const wakeUp of [...session.wakers]) wakeUp();
  if (session.inflight.size > 0) {
    await Promise.race([Promise.allSettled([...session.inflight]), delay(ctx.timers, ctx.inflightGraceMs)]);
  }
  const plan = new SessionEndPlan({
    maxOwnersPerTxn: ctx.store.limits.maxEndSessionOwners,
    giveUpAtMs: ctx.clock.nowMs() + 2_000 * ctx.leaseTtlSeconds,
  });
  let action: EndAction = plan.first();
  for (;;) {
    if (action.kind === 'finish') break;
    let seen: EndObservation | { kind: 'next'; action: EndAction };
    try {
      seen = await perform(session, ctx, hooks, plan, action);
    } catch (err) {
      const gate = ctx.repeats.note(`end ${sessionId}`, ctx.clock.nowMs());
      if (gate.log) log.warn({ err, repeated: gate.suppressed }, 'ending session failed, retrying');
      seen = { kind: 'error', nowMs: ctx.clock.nowMs() };
    }
    action = seen.kind === 'next' ? seen.action : plan.next(seen);
  }
  ctx.repeats.clear(`end ${sessionId}`);
  hooks.finished(session);
  const channel = session.channel;
  if (action.result === 'moved') {
    log.info('session was adopted by a peer before its deadline here');
    channel?.close(CLOSE_SESSION_MOVED, 'session moved to another coordinator');
    return;
  }
  const { held } = action;
  if (action.result === 'ended') log.info({ held: held.length }, 'session expired');
  else log.warn('could not end session in the store, leaving it to the lease backstop');
  if (action.revision !== undefined) freeInIndex(ctx, hooks, held, action.revision);
  ctx.metrics.expiries.inc({ reason: 'deadline' });
  // Told first (its owner keys are gone from the store already, or the session key was): the
  // revoke only drops what is left on the lease and does not change what the worker may do.
  for (const h of held) {
    channel?.send({
      type: 'lease.revoked',
      resource: h.resource,
      token: formatToken(h.token),
      reason: 'session-expired',
    });
  }
  channel?.send({ type: 'session.expired', sessionId, reason: 'deadline' });
  if (action.revoke) {
    try {
      await ctx.store.revokeLease(session.leaseId);
    } catch (err) {
      ctx.log.warn({ err }, 'lease revoke failed; the lease TTL will end it');
    }
  }
}

/** One step of the end plan against the store; what was seen (or the plan's next action). */
async function perform(
  session: LocalSession,
  ctx: SessionEndContext,
  hooks: SessionEndHooks,
  plan: SessionEndPlan,
  action: Exclude<EndAction, { kind: 'finish' }>,
): Promise<EndObservation | { kind: 'next'; action: EndAction }> {
  const { store, index } = ctx;
  switch (action.kind) {
    case 'endFromIndex': {
      const held = index.ownersOf(session.sessionId).map((o) => ({ resource: o.resource, token: o.token }));
      return { kind: 'next', action: plan.fromIndex(held, index.revision) };
    }
    case 'readHoldings': {
      const read = await store.sessionHoldings(session.sessionId);
      return {
        kind: 'holdings',
        session: holdingsState(read.session?.modRevision, session.modRevision),
        held: read.held,
      };
    }
    case 'end': {
      // The first attempt (holdings from the index) records the lost attempts too; a later one
      // (holdings read from the store after a failed compare) leaves them to the settle service.
      const fold = action.knownUpTo === undefined ? [] : (ctx.settlements?.foldable(action.held) ?? []);
      const settle = fold.length <= store.limits.maxEndSettlements(action.held.length) ? fold : [];
      const outcome = await ctx.end({
        sessionId: session.sessionId,
        knownModRevision: session.modRevision,
        held: action.held,
        ...(action.knownUpTo === undefined ? {} : { knownUpTo: action.knownUpTo }),
        ...(settle.length === 0 ? {} : { settle }),
      });
      // Before the owners are freed (finish): the index offers the settled tasks at once.
      if (outcome.kind === 'ended' && settle.length > 0) ctx.settlements?.folded(settle, outcome.revision);
      return { kind: 'ended', held: action.held, outcome };
    }
    case 'close': {
      // Too many owner keys for one txn: mark the session ending (only if still ours); the lease
      // revoke deletes every key on it at one revision, and the watch frees them.
      const outcome = await store.closeSession({
        sessionId: session.sessionId,
        leaseId: session.leaseId,
        knownModRevision: session.modRevision,
        record: hooks.record(session),
      });
      return { kind: 'closed', held: action.held, outcome };
    }
    case 'wait':
      await delay(ctx.timers, action.ms);
      return { kind: 'waited' };
  }
}

/**
 * The owner keys are gone in etcd (the end txn succeeded): drop them from the index now instead of
 * waiting for the watch to say so, and wake waiting acquires. The index is a hint (a grant txn
 * compares the owner key's absence), and the watch's own delete of the same key is a no-op.
 */
function freeInIndex(
  ctx: SessionEndContext,
  hooks: SessionEndHooks,
  held: readonly HeldOwner[],
  revision: bigint,
): void {
  if (held.length === 0) return;
  const freed: OwnerEntry[] = [];
  for (const h of held) {
    const entry = ctx.index.freeOwner(h.resource, h.token, revision);
    if (entry !== undefined) freed.push(entry);
  }
  hooks.ownersFreed(freed);
}
