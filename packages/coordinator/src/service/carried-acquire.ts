/**
 * A completion that carries its slot's next acquire (`task.complete` with `next`, protocol feature
 * `complete.next`).
 *
 * The completion is decided first, exactly as a lone `task.complete`; then, whatever its answer,
 * the carried acquire is taken as a lone `lease.acquire` arriving at that moment would be —
 * capacity, idempotency by request id and the long poll are the grant service's, unchanged. A
 * connection that closed meanwhile takes nothing: the worker asks again with the same request id.
 *
 * **In the completion's own txn** (issue 27). When the completion takes its fast path (this
 * coordinator knows the lease without a read) and a task is grantable at once, the carried acquire's grant is
 * nested in the completion's finish txn (`GrantService.joinCarried`, lease-txns.ts): one etcd txn
 * and one watch revision for both instead of two, one after the other. It is judged only if the
 * finish's compares hold, so the session never holds the new grant without having ended the old
 * one (capacity, G28), and as if it ran right after the finish (no key of it is one the finish
 * writes). Everything after the txn is the grant service's as for any grant: the fence advance
 * before `lease.granted`, a race (select again), a replay. When the grant was not tried (the
 * completion was refused, or sent without it), the acquire is taken alone, as above.
 *
 * The completion's reply is **held until the carried acquire is answered**, so both replies leave
 * in the same turn — one write on the connection's per-turn cork — and the worker wakes once for
 * both instead of twice. The hold ends at the first of: the acquire answered (granted, none, or an
 * error: then the completion's reply goes first, the acquire's right after it), the acquire starting
 * to wait for work (a long poll: nothing is grantable now, so the grant may be far off), or
 * {@link COMPLETION_HOLD_MS}. Holding delays only the news: the completion is already durable in
 * etcd when its reply is held, and a reply lost with a closed connection is recovered as any lost
 * reply is (the retry of the same result id is a replay).
 */
import type { Acquire, Clock, Complete, CoordinatorMessage } from '@leasehold/protocol';
import { failureReply } from '../core/replies.js';
import type { TimerHandle, Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { GrantService, JoinedAcquire } from './grants.js';
import type { CompletionRide, LeaseService } from './leases.js';
import type { LocalSession } from './local-session.js';

/**
 * The longest a completion's reply waits for its carried acquire's answer. A grant takes one etcd
 * txn and one fence advance: a few ms on an idle cluster, tens of ms under load (see
 * docs/benchmarks.md); past this bound the completion's reply goes alone. Far below the SDK's
 * request timeout (5 s by default), so the hold does not make a completion look lost; a worker
 * whose timeout is shorter retries it, and the retry is a replay.
 */
export const COMPLETION_HOLD_MS = 100;

export interface CarriedAcquireContext {
  readonly leases: Pick<LeaseService, 'complete'>;
  readonly grants: Pick<GrantService, 'acquire' | 'joinCarried'>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly metrics: Pick<Metrics, 'completionHolds' | 'carriedAcquires'>;
}

/** Where the replies go: the worker's connection. */
export interface ReplyOutlet {
  /** The connection still serves this session (a closed one takes no carried acquire). */
  readonly live: () => boolean;
  /** Send one reply (a no-op on a closed connection). */
  readonly deliver: (reply: CoordinatorMessage) => void;
}

export class CarriedAcquires {
  readonly #ctx: CarriedAcquireContext;

  constructor(ctx: CarriedAcquireContext) {
    this.#ctx = ctx;
  }

  /** Complete `msg` for `session`, then take `msg.next` (if any); both replies go to `out`. */
  complete(session: LocalSession, msg: Complete, out: ReplyOutlet): void {
    const ctx = this.#ctx;
    const next = msg.next;
    if (next === undefined) {
      ctx.leases.complete(session, msg).then(out.deliver, (err: unknown) => {
        out.deliver(failureReply(err, msg.id));
      });
      return;
    }
    const acquire: Acquire = { type: 'lease.acquire', ...next };
    let held: CoordinatorMessage | undefined;
    let timer: TimerHandle | undefined;
    const release = (ended: 'answered' | 'waiting' | 'bound'): void => {
      if (held === undefined) return;
      ctx.metrics.completionHolds.inc({ ended });
      const m = held;
      held = undefined;
      ctx.timers.clearTimeout(timer);
      out.deliver(m);
    };
    const hooks = {
      onWait: () => {
        release('waiting');
      },
    };
    let joined: JoinedAcquire | undefined;
    const ride: CompletionRide = {
      board: (completing) => {
        if (!out.live()) return undefined;
        joined = ctx.grants.joinCarried(session, acquire, ctx.clock.nowMs(), hooks, completing);
        return joined?.job;
      },
    };
    ctx.leases.complete(session, msg, ride).then(
      (reply) => {
        const tried = ride.outcome !== undefined;
        if (!tried && !out.live()) {
          // A connection closed meanwhile takes nothing (a grant made in the txn stands: the
          // worker's retry of the request id gets it back).
          joined?.cancel(ride.unsure === true);
          out.deliver(reply);
          return;
        }
        // The completion's reply is held until the acquire is answered (or waits, or the bound).
        held = reply;
        timer = ctx.timers.setTimeout(() => {
          release('bound');
        }, COMPLETION_HOLD_MS);
        ctx.metrics.carriedAcquires.inc({ taken: tried ? 'in_completion_txn' : 'after_completion' });
        const answer =
          joined === undefined
            ? ctx.grants.acquire(session, acquire, ctx.clock.nowMs(), hooks)
            : joined.settle(ride.outcome, ride.unsure === true);
        answer.then(
          (a) => {
            release('answered');
            out.deliver(a);
          },
          (err: unknown) => {
            release('answered');
            out.deliver(failureReply(err, next.id));
          },
        );
      },
      (err: unknown) => {
        out.deliver(failureReply(err, msg.id));
      },
    );
  }
}
