/**
 * Is etcd answering this coordinator? A probe (one small read) runs every `probeMs`; when no probe
 * has succeeded for `etcdGiveUpMs` (judged on the monotonic clock) while one was outstanding, the coordinator stops serving
 * its sessions: it closes the worker sockets with 1001, so the workers resume on a peer that can
 * reach etcd (the peer adopts their sessions: nothing is lost while the etcd lease lives, which is
 * the session TTL plus `etcdLeaseMarginMs`), and refuses hellos until etcd answers again.
 *
 * Without this, a coordinator cut off from etcd keeps acknowledging heartbeats from memory while
 * etcd expires the session leases and a peer re-grants their tasks: its workers would believe
 * their leases live. Safety never depended on it (the fence refuses their writes); liveness does.
 */
import type { Clock } from '@leasehold/protocol';
import type { Logger } from 'pino';
import type { CoordinatorConfig } from '../config.js';
import type { TimerHandle, Timers } from '../core/timers.js';
import type { Metrics } from '../metrics.js';
import type { LeaseStore } from '../store/port.js';
import type { CoordinatorState } from './context.js';

/** What the etcd health judgement uses; it alone writes `state.etcdUnreachable`. */
export interface EtcdHealthContext {
  readonly config: Pick<CoordinatorConfig, 'etcdGiveUpMs'>;
  readonly clock: Clock;
  readonly timers: Timers;
  readonly log: Logger;
  readonly metrics: Pick<Metrics, 'etcdHealthy'>;
  readonly store: Pick<LeaseStore, 'ping'>;
  readonly state: Pick<CoordinatorState, 'etcdUnreachable'>;
}

export interface EtcdHealthEvents {
  /** etcd has not answered for `etcdGiveUpMs`. */
  onUnreachable(silentMs: number): void;
  /** etcd answers again. */
  onReachable(): void;
}

export class EtcdHealth {
  readonly #ctx: EtcdHealthContext;
  readonly #events: EtcdHealthEvents;
  readonly #probeMs: number;
  #lastOkMs: number;
  #probing = false;
  /**
   * A probe was sent since the last answer and has not succeeded. Silence only counts while we are
   * asking: a process paused (SIGSTOP, a long GC, a test's manual clock jump) finds `silentMs` huge
   * on waking, but etcd may be fine — it asks once more before it gives its sessions away.
   */
  #unanswered = false;
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(ctx: EtcdHealthContext, events: EtcdHealthEvents) {
    this.#ctx = ctx;
    this.#events = events;
    this.#probeMs = Math.max(50, Math.min(1_000, Math.floor(ctx.config.etcdGiveUpMs / 4)));
    this.#lastOkMs = ctx.clock.nowMs();
  }

  get reachable(): boolean {
    return !this.#ctx.state.etcdUnreachable;
  }

  start(): void {
    this.#lastOkMs = this.#ctx.clock.nowMs();
    this.#arm();
  }

  /** Something else heard from etcd (a txn got an answer): as good as a probe. */
  heard(): void {
    this.#ok();
  }

  close(): void {
    this.#closed = true;
    this.#ctx.timers.clearTimeout(this.#timer);
  }

  #arm(): void {
    if (this.#closed) return;
    this.#timer = this.#ctx.timers.setTimeout(() => {
      this.#tick();
    }, this.#probeMs);
  }

  #tick(): void {
    this.#arm();
    const silentMs = this.#ctx.clock.nowMs() - this.#lastOkMs;
    if (!this.#ctx.state.etcdUnreachable && this.#unanswered && silentMs >= this.#ctx.config.etcdGiveUpMs) {
      this.#ctx.state.etcdUnreachable = true;
      this.#ctx.metrics.etcdHealthy.set(0);
      // warn, not error: an etcd outage is a dependency's trouble the coordinator rides out (its
      // sessions move to peers); the gauge and /readyz carry it for alerts.
      this.#ctx.log.warn(
        { silentMs: Math.round(silentMs), giveUpMs: this.#ctx.config.etcdGiveUpMs },
        'etcd unreachable: handing sessions to peers and refusing hellos until it answers',
      );
      this.#events.onUnreachable(silentMs);
    }
    if (this.#probing) return;
    this.#probing = true;
    this.#unanswered = true;
    this.#ctx.store
      .ping()
      .then((ok) => {
        if (ok) this.#ok();
      })
      .catch(() => undefined)
      .finally(() => {
        this.#probing = false;
      });
  }

  #ok(): void {
    this.#lastOkMs = this.#ctx.clock.nowMs();
    this.#unanswered = false;
    if (!this.#ctx.state.etcdUnreachable || this.#closed) return;
    this.#ctx.state.etcdUnreachable = false;
    this.#ctx.metrics.etcdHealthy.set(1);
    this.#ctx.log.info('etcd reachable again: taking sessions');
    this.#events.onReachable();
  }
}
