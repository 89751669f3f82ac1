/**
 * Steps (b) and (c) of a grant (see grants.ts): the sink durably advances the resource's fence to
 * the token, and only then is `lease.granted` {token, capability} sent. A refused or failed
 * advance sends nothing and undoes the grant (its attempt given back with the task's backoff).
 * The capability is signed here, and only here.
 */
import { context, trace, type Span } from '@opentelemetry/api';
import {
  formatToken,
  type Acquire,
  type CapabilityClaims,
  type Clock,
  type CoordinatorMessage,
  type JsonValue,
  type RepeatGate,
} from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import { advanceRefusedReply, grantedMessage, grantTiming } from '../core/grant-decisions.js';
import { abandoned } from '../core/lifecycle.js';
import type { TaskRecord } from '../core/records.js';
import { failureReply, errorFrame } from '../core/replies.js';
import type { Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore } from '../store/port.js';
import { lifecycleEnv, type FenceAdvances, type LifecycleContext } from './context.js';
import type { LocalSession, SessionRegistry } from './local-session.js';
import { Attr, markFailed, markRefused, traceparentOf } from './tracing.js';

/** What delivering a grant uses. */
export interface DeliveryContext extends LifecycleContext {
  readonly config: Pick<CoordinatorConfig, 'noLeaseRetryAfterMs' | 'retryPolicy'>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly repeats: RepeatGate;
  readonly metrics: Pick<Metrics, 'grants' | 'grantWait' | 'grantWork' | 'lifecycle'>;
  readonly store: Pick<LeaseStore, 'abandonGrant'>;
  readonly fences: FenceAdvances;
  /** Advances of takeover grants: their own group commit, not behind the ordinary ones (default `fences`). */
  readonly takeoverFences?: FenceAdvances;
  /** Signs a grant's capability (the capability signing key is in this closure, nowhere else here). */
  readonly signCapability: (claims: CapabilityClaims) => string;
}

export interface GrantFacts {
  readonly resource: string;
  readonly taskId: string;
  readonly token: bigint;
  readonly payload: JsonValue;
  readonly attempt: number;
  /** The task record the grant txn wrote (fresh grants only: what an abandon starts from). */
  readonly written?: TaskRecord;
  /** `leasehold.lease.grant`: the fence advance runs in its context; `lease.granted` carries it. */
  readonly span: Span;
  /** A takeover (core/grant-decisions `isTakeover`): its advance goes through `takeoverFences`. */
  readonly takeover?: boolean;
}

/**
 * Where one acquire's time went: wait is the long poll (from the request to the moment a
 * grantable task was found, after the last wake-up); work is the rest, up to the grant (owner txn,
 * fence advance, candidates tried again after a race).
 */
export interface GrantTiming {
  readonly receivedAtMs: number;
  /** When the current round started trying candidates; reset when the acquire waits again. */
  workStartMs: number | undefined;
}

export class GrantDelivery {
  readonly #ctx: DeliveryContext;
  readonly #sessions: SessionRegistry;

  constructor(ctx: DeliveryContext, sessions: SessionRegistry) {
    this.#ctx = ctx;
    this.#sessions = sessions;
  }

  /** Steps (b) and (c). */
  async fenceAndDeliver(
    session: LocalSession,
    msg: Acquire,
    grant: GrantFacts,
    timing: GrantTiming,
    fresh: boolean,
  ): Promise<CoordinatorMessage> {
    const ctx = this.#ctx;
    // Built only when something goes wrong: a child logger per grant is measurable at 10k grants/s.
    const log = () =>
      ctx.log.child({ sessionId: session.sessionId, resource: grant.resource, token: formatToken(grant.token) });
    const { span } = grant;
    // Signed before the advance so that the advance can vouch for it (the sink then skips verifying
    // it on the grant's first write); deterministic, so a replay carries the same string.
    const capability = ctx.signCapability({
      resource: grant.resource,
      token: grant.token,
      workerId: session.workerId,
      incarnation: session.incarnation,
    });
    try {
      // In the grant span's context: a batch of one carries it to the sink as `traceparent`.
      const advanced = await context.with(trace.setSpan(context.active(), span), () =>
        (grant.takeover === true ? (ctx.takeoverFences ?? ctx.fences) : ctx.fences).submit({
          resource: grant.resource,
          token: grant.token,
          grant: { workerId: session.workerId, incarnation: session.incarnation, capability },
        }),
      );
      span.addEvent('fence.advance', {
        [Attr.OUTCOME]: advanced.ok ? advanced.outcome : advanced.code,
        [Attr.FENCE]: formatToken(advanced.fence),
      });
      if (!advanced.ok) {
        span.setAttribute(Attr.OUTCOME, 'abandoned');
        markRefused(span, advanced.code, 'the sink refused the fence advance: grant abandoned');
        log().warn({ fence: formatToken(advanced.fence) }, 'fence advance refused, grant abandoned');
        await this.abandon(
          session,
          msg.requestId,
          grant,
          `the sink refused the fence advance (fence ${formatToken(advanced.fence)})`,
        );
        ctx.metrics.grants.inc({ outcome: 'abandoned' });
        return advanceRefusedReply(fresh, msg, advanced.fence, ctx.config.noLeaseRetryAfterMs);
      }
    } catch (err) {
      span.setAttribute(Attr.OUTCOME, 'advance_failed');
      markFailed(span, err);
      const gate = ctx.repeats.note('grant advance', ctx.clock.nowMs());
      if (gate.log) log().warn({ err, repeated: gate.suppressed }, 'fence advance failed, grant not sent');
      // A replayed grant may already be in the worker's hands: keep it; the worker retries.
      if (fresh) await this.abandon(session, msg.requestId, grant, `the fence advance failed: ${String(err)}`);
      ctx.metrics.grants.inc({ outcome: 'error' });
      return failureReply(err, msg.id);
    }
    if (!this.#sessions.isLive(session)) {
      return errorFrame('SESSION_EXPIRED', 'session expired before the grant could be sent', msg.id);
    }
    return this.#grantMessage(session, msg, grant, capability, timing, fresh);
  }

  /** Step (c): the grant, with its capability. */
  #grantMessage(
    session: LocalSession,
    msg: Acquire,
    grant: GrantFacts,
    capability: string,
    timing: GrantTiming,
    fresh: boolean,
  ): CoordinatorMessage {
    const ctx = this.#ctx;
    session.granted.set(grant.resource, {
      token: grant.token,
      requestId: msg.requestId,
      ...(fresh && grant.written !== undefined ? { written: grant.written } : {}),
    });
    ctx.metrics.grants.inc({ outcome: fresh ? 'granted' : 'replayed' });
    grant.span.setAttribute(Attr.OUTCOME, fresh ? 'granted' : 'replayed');
    const traceparent = traceparentOf(grant.span);
    const took = grantTiming(timing.receivedAtMs, timing.workStartMs, ctx.clock.nowMs());
    ctx.metrics.grantWait.observe(took.waitSeconds);
    ctx.metrics.grantWork.observe(took.workSeconds);
    if (ctx.log.isLevelEnabled('debug')) {
      ctx.log.debug(
        { sessionId: session.sessionId, resource: grant.resource, token: formatToken(grant.token), replay: !fresh },
        'lease granted',
      );
    }
    return grantedMessage({
      inReplyTo: msg.id,
      requestId: msg.requestId,
      taskId: grant.taskId,
      resource: grant.resource,
      token: grant.token,
      capability,
      sessionLeftMs: this.#sessions.remainingMs(session),
      payload: grant.payload,
      attempt: grant.attempt,
      traceparent,
    });
  }

  /**
   * The grant will never be sent: remove it, and close its attempt (given back, with the task's
   * backoff for abandoned grants, so a sink outage costs a bounded number of grant attempts).
   */
  async abandon(session: LocalSession, requestId: string, grant: GrantFacts, reason: string): Promise<void> {
    const ctx = this.#ctx;
    const written = grant.written;
    const next =
      written === undefined ? undefined : abandoned(written, grant.token, reason.slice(0, 500), lifecycleEnv(ctx));
    const ref = {
      sessionId: session.sessionId,
      requestId,
      resource: grant.resource,
      token: grant.token,
      ...(next === undefined ? {} : { next }),
    };
    try {
      const outcome = await ctx.store.abandonGrant(ref);
      ctx.metrics.lifecycle.inc({ change: 'abandon', outcome });
    } catch (err) {
      ctx.log.warn({ err, resource: grant.resource }, 'could not remove an unsent grant; the session end will');
    }
  }
}
