/**
 * What this coordinator does when the watch shows a revision's changes:
 * - sessions/<sid> rewritten by a peer (adoption): stop serving that session here, without ending it;
 * - owners/<r> deleted: the grant has ended (forget it in the holder's session, if served here);
 *   together with its task turning `cancelled`: push `lease.revoked` (cancelled) to the holder;
 * - owners/<r> deleted while its task still shows the attempt open (the lease ended without the
 *   holder ending it): the settle service records the lost attempt (after a grace period here,
 *   since the session's own coordinator settles at once);
 * - fence-on-expiry (opt-in): owners/<r> deleted at the same revision as its session key (session
 *   ended at its deadline, or the etcd lease expired / was revoked): advance the sink fence of r to
 *   that deletion revision, so the expired holder is refused even before anyone takes over.
 *   Every coordinator does it; an advance to the same token is a no-op at the sink.
 */
import { formatToken, type Clock, type RepeatGate } from '@leasehold/protocol';
import { ExponentialBackoff, handleAll, retry } from 'cockatiel';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { Metrics } from '../metrics.js';
import type { CoordinatorState, FenceAdvances } from './context.js';
import type { SessionManager } from './sessions.js';
import type { SettleService } from './settle.js';
import type { RevisionGroup } from './watch-feed.js';

/** What the reactions to the watch use. */
export interface ReactionsContext {
  readonly coordinatorId: string;
  readonly config: Pick<CoordinatorConfig, 'fenceOnExpiry'>;
  readonly clock: Clock;
  readonly log: Logger;
  readonly repeats: RepeatGate;
  readonly metrics: Pick<Metrics, 'fencesOnExpiry'>;
  readonly fences: FenceAdvances;
  readonly state: Readonly<Pick<CoordinatorState, 'shuttingDown'>>;
}

export function createGroupHandler(
  ctx: ReactionsContext,
  sessions: Pick<SessionManager, 'get' | 'onPeerAdopted'>,
  settle: Pick<SettleService, 'ownerGone'>,
): (group: RevisionGroup) => void {
  return (group) => {
    const endedSessions = new Set<string>();
    const cancelledTasks = new Set<string>();
    for (const ev of group.events) {
      if (ev.kind === 'session') {
        if (ev.session === undefined) endedSessions.add(ev.sessionId);
        else if (ev.session.record.coordinatorId !== ctx.coordinatorId) {
          sessions.onPeerAdopted(ev.sessionId, ev.session.record.coordinatorId, group.revision);
        }
      } else if (ev.kind === 'task' && ev.task?.record.state === 'cancelled') {
        cancelledTasks.add(ev.taskId);
      }
    }
    for (const ev of group.events) {
      if (ev.kind !== 'owner' || ev.owner !== undefined || ev.previous === undefined) continue;
      const { resource, taskId, sessionId, token } = ev.previous;
      // However the owner key went (release, complete, cancel, session end), the grant has ended.
      const holder = sessions.get(sessionId);
      if (holder?.granted.get(resource)?.token === token) holder.granted.delete(resource);
      if (cancelledTasks.has(taskId)) {
        holder?.channel?.send({
          type: 'lease.revoked',
          resource,
          token: formatToken(token),
          reason: 'cancelled',
        });
      }
      settle.ownerGone(ev.previous, false);
      if (ctx.config.fenceOnExpiry && endedSessions.has(sessionId)) fenceOnExpiry(ctx, resource, group.revision);
    }
  };
}

/** An advance is idempotent: retried by one policy (3 more attempts, 100 ms doubling). */
const advanceRetry = retry(handleAll, { maxAttempts: 3, backoff: new ExponentialBackoff({ initialDelay: 100 }) });

/** Advance the fence to the deletion revision (retried; a failure leaves it to the next grant). */
function fenceOnExpiry(ctx: ReactionsContext, resource: string, revision: bigint): void {
  const log = ctx.log.child({ resource, token: revision.toString() });
  advanceRetry
    .execute(async () => {
      if (ctx.state.shuttingDown) throw new Error('shutting down');
      const res = await ctx.fences.submit({ resource, token: revision });
      ctx.metrics.fencesOnExpiry.inc({ outcome: res.ok ? res.outcome : 'stale' });
      log.info({ fence: formatToken(res.fence) }, 'fence advanced on expiry');
    })
    .catch((err: unknown) => {
      ctx.metrics.fencesOnExpiry.inc({ outcome: 'error' });
      const gate = ctx.repeats.note('fence on expiry', ctx.clock.nowMs());
      if (gate.log) {
        log.warn(
          { err, repeated: gate.suppressed },
          'fence advance on expiry failed; the next grant of this resource will move it',
        );
      }
    });
}
